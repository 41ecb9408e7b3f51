#include "planner/names.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string_view>

#include "planner/spellings.h"

namespace meshplan {

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

namespace {

constexpr Spellings<BlockKind, 2> kBlockKinds{{{BlockKind::kLlama, "llama"}, {BlockKind::kGpt, "gpt"}}};
constexpr Spellings<FfnActivation, 2> kFfnActivations{
    {{FfnActivation::kSwiGlu, "swiglu"}, {FfnActivation::kSquaredRelu, "squared-relu"}}};
constexpr Spellings<Precision, 4> kPrecisions{{{Precision::kBf16, "bf16"},
                                               {Precision::kMixed, "mixed"},
                                               {Precision::kFp32, "fp32"},
                                               {Precision::kFp8, "fp8"}}};
constexpr Spellings<Recompute, 5> kRecomputes{{{Recompute::kNone, "none"},
                                               {Recompute::kSelective, "selective"},
                                               {Recompute::kFull, "full"},
                                               {Recompute::kOp, "op"},
                                               {Recompute::kEvery, "every"}}};
constexpr std::string_view kEveryPrefix = "every:";
constexpr Spellings<PipelineSchedule, 4> kSchedules{{{PipelineSchedule::kGpipe, "gpipe"},
                                                     {PipelineSchedule::k1F1B, "1f1b"},
                                                     {PipelineSchedule::kInterleaved, "interleaved"},
                                                     {PipelineSchedule::kZeroBubbleH1, "zb_h1"}}};

constexpr Spellings<GradAccumulation, 2> kGradAccumulations{
    {{GradAccumulation::kFused, "fused"}, {GradAccumulation::kSeparate, "separate"}}};

}  // namespace

const char* ToString(BlockKind kind) { return SpellingOf(kBlockKinds, kind); }
const char* ToString(FfnActivation activation) { return SpellingOf(kFfnActivations, activation); }
const char* ToString(Precision precision) { return SpellingOf(kPrecisions, precision); }
const char* ToString(Recompute recompute) { return SpellingOf(kRecomputes, recompute); }
const char* ToString(PipelineSchedule schedule) { return SpellingOf(kSchedules, schedule); }
const char* ToString(GradAccumulation mode) { return SpellingOf(kGradAccumulations, mode); }

bool ParseBlockKind(const std::string& name, BlockKind* out) { return ParseSpelling(kBlockKinds, name, out); }
bool ParseFfnActivation(const std::string& name, FfnActivation* out) {
  return ParseSpelling(kFfnActivations, name, out);
}
bool ParsePrecision(const std::string& name, Precision* out) { return ParseSpelling(kPrecisions, name, out); }
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
  if (!ParseSpelling(kRecomputes, name, &kind) || kind == Recompute::kEvery) return false;
  *out = kind;
  return true;
}
bool ParsePipelineSchedule(const std::string& name, PipelineSchedule* out) {
  return ParseSpelling(kSchedules, name, out);
}
bool ParseGradAccumulation(const std::string& name, GradAccumulation* out) {
  return ParseSpelling(kGradAccumulations, name, out);
}

namespace {
// AllowedSpellings(Table), built once and kept for the const char* the Allowed* return.
template <const auto& Table>
const char* AllowedList() {
  static const std::string names = AllowedSpellings(Table);
  return names.c_str();
}
}  // namespace

const char* AllowedBlockKinds() { return AllowedList<kBlockKinds>(); }
const char* AllowedFfnActivations() { return AllowedList<kFfnActivations>(); }
const char* AllowedPrecisions() { return AllowedList<kPrecisions>(); }
const char* AllowedRecomputes() {
  return "none, selective, full, op, every:N (N an integer >= 2; every:1 is full)";
}
const char* AllowedPipelineSchedules() { return AllowedList<kSchedules>(); }
const char* AllowedGradAccumulations() { return AllowedList<kGradAccumulations>(); }

}  // namespace meshplan
