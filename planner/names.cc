#include "planner/names.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <string_view>
#include <utility>

namespace meshplan {

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

namespace {

template <typename Enum, size_t N>
using NameTable = std::array<std::pair<Enum, const char*>, N>;

constexpr NameTable<BlockKind, 2> kBlockKinds{{{BlockKind::kLlama, "llama"}, {BlockKind::kGpt, "gpt"}}};
constexpr NameTable<Precision, 4> kPrecisions{{{Precision::kBf16, "bf16"},
                                               {Precision::kMixed, "mixed"},
                                               {Precision::kFp32, "fp32"},
                                               {Precision::kFp8, "fp8"}}};
constexpr NameTable<Recompute, 5> kRecomputes{{{Recompute::kNone, "none"},
                                               {Recompute::kSelective, "selective"},
                                               {Recompute::kFull, "full"},
                                               {Recompute::kOp, "op"},
                                               {Recompute::kEvery, "every"}}};
constexpr std::string_view kEveryPrefix = "every:";
constexpr NameTable<PipelineSchedule, 4> kSchedules{{{PipelineSchedule::kGpipe, "gpipe"},
                                                     {PipelineSchedule::k1F1B, "1f1b"},
                                                     {PipelineSchedule::kInterleaved, "interleaved"},
                                                     {PipelineSchedule::kZeroBubbleH1, "zb_h1"}}};

constexpr NameTable<GradAccumulation, 2> kGradAccumulations{
    {{GradAccumulation::kFused, "fused"}, {GradAccumulation::kSeparate, "separate"}}};

template <typename Enum, size_t N>
const char* NameOf(const NameTable<Enum, N>& table, Enum value) {
  for (const auto& [v, name] : table)
    if (v == value) return name;
  return "?";
}

template <typename Enum, size_t N>
bool Lookup(const NameTable<Enum, N>& table, const std::string& name, Enum* out) {
  for (const auto& [v, n] : table)
    if (name == n) {
      *out = v;
      return true;
    }
  return false;
}

}  // namespace

const char* ToString(BlockKind kind) { return NameOf(kBlockKinds, kind); }
const char* ToString(Precision precision) { return NameOf(kPrecisions, precision); }
const char* ToString(Recompute recompute) { return NameOf(kRecomputes, recompute); }
const char* ToString(PipelineSchedule schedule) { return NameOf(kSchedules, schedule); }
const char* ToString(GradAccumulation mode) { return NameOf(kGradAccumulations, mode); }

bool ParseBlockKind(const std::string& name, BlockKind* out) { return Lookup(kBlockKinds, name, out); }
bool ParsePrecision(const std::string& name, Precision* out) { return Lookup(kPrecisions, name, out); }
std::string ToString(const RecomputePolicy& policy) {
  if (policy.kind == Recompute::kEvery) return std::string(kEveryPrefix) + std::to_string(policy.every);
  return ToString(policy.kind);
}

bool ParseRecompute(const std::string& name, RecomputePolicy* out) {
  if (name.starts_with(kEveryPrefix)) {
    const char* begin = name.data() + kEveryPrefix.size();
    const char* end = name.data() + name.size();
    int64_t n = 0;
    const auto [ptr, ec] = std::from_chars(begin, end, n);
    if (ec != std::errc() || ptr != end || begin == end || n < 2) return false;
    *out = RecomputePolicy::Every(n);
    return true;
  }
  Recompute kind{};
  if (!Lookup(kRecomputes, name, &kind) || kind == Recompute::kEvery) return false;
  *out = kind;
  return true;
}
bool ParsePipelineSchedule(const std::string& name, PipelineSchedule* out) {
  return Lookup(kSchedules, name, out);
}
bool ParseGradAccumulation(const std::string& name, GradAccumulation* out) {
  return Lookup(kGradAccumulations, name, out);
}

const char* AllowedBlockKinds() { return "llama, gpt"; }
const char* AllowedPrecisions() { return "bf16, mixed, fp32, fp8"; }
const char* AllowedRecomputes() {
  return "none, selective, full, op, every:N (N an integer >= 2; every:1 is full)";
}
const char* AllowedPipelineSchedules() { return "gpipe, 1f1b, interleaved, zb_h1"; }
const char* AllowedGradAccumulations() { return "fused, separate"; }

}  // namespace meshplan
