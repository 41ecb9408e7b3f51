#include "planner/plan_fields.h"

#include <array>
#include <charconv>
#include <climits>
#include <sstream>
#include <type_traits>
#include <utility>

#include "planner/input_error.h"
#include "planner/limits.h"
#include "planner/names.h"

namespace meshplan {
namespace {

template <auto Member>
int64_t Get(const ParallelPlan& plan) {
  return static_cast<int64_t>(plan.*Member);
}

template <auto Member>
void Set(ParallelPlan& plan, int64_t value) {
  using T = std::remove_cvref_t<decltype(plan.*Member)>;
  plan.*Member = static_cast<T>(value);
}

template <auto Member>
PlanFieldSpec Field(PlanField id, const char* key, PlanFieldKind kind, PlanFieldRole role,
                    const char* doc) {
  return PlanFieldSpec{id, key, doc, kind, role, false, &Get<Member>, &Set<Member>};
}

// A field ToPlanString prints at its default too.
PlanFieldSpec Always(PlanFieldSpec f) {
  f.always_printed = true;
  return f;
}

// An integer field bounded by a docs/limits.md bound: a pin takes min..limit.
PlanFieldSpec Bounded(PlanFieldSpec f, int64_t min, int64_t bound, const char* limit) {
  f.min = min;
  f.max = f.parse_max = bound;
  f.limit = limit;
  f.allowed = "an integer from " + std::to_string(min) + " to " + std::to_string(bound) + " (" +
              limit + ", docs/limits.md)";
  return f;
}

// An integer field with a small range of its own, named by `allowed`.
PlanFieldSpec Ranged(PlanFieldSpec f, int64_t min, int64_t max, int64_t parse_min,
                     int64_t parse_max, std::string allowed) {
  f.min = min;
  f.max = max;
  f.parse_min = parse_min;
  f.parse_max = parse_max;
  f.allowed = std::move(allowed);
  return f;
}

// An enum field: its values' names (planner/names.h), and how a name parses.
template <typename E, bool (*Parse)(const std::string&, E*)>
PlanFieldSpec Enum(PlanFieldSpec f, const char* allowed) {
  f.allowed = allowed;
  f.name = [](int64_t v) { return std::string(ToString(static_cast<E>(v))); };
  f.parse = [](const std::string& text, int64_t* v) {
    E e{};
    if (!Parse(text, &e)) return false;
    *v = static_cast<int64_t>(e);
    return true;
  };
  return f;
}

// The recompute field: a policy, every:N carrying its period (RecomputeCode).
PlanFieldSpec RecomputeField() {
  PlanFieldSpec f{PlanField::kRecompute, "recompute", "activation recomputation in the backward",
                  PlanFieldKind::kEnum, PlanFieldRole::kAxis, /*always_printed=*/true,
                  [](const ParallelPlan& p) { return RecomputeCode(p.recompute); },
                  [](ParallelPlan& p, int64_t v) { p.recompute = RecomputeOfCode(v); }};
  f.help = "none; selective: Megatron's attention core; full: every block from its input; op: "
           "torchtitan's op-level selective checkpointing; every:N: every N-th block full, the "
           "others none (torchtitan's layer-level, every:2 its default)";
  f.allowed = AllowedRecomputes();
  f.name = [](int64_t v) { return ToString(RecomputeOfCode(v)); };
  f.parse = [](const std::string& text, int64_t* v) {
    RecomputePolicy policy;
    if (!ParseRecompute(text, &policy)) return false;
    *v = RecomputeCode(policy);
    return true;
  };
  return f;
}

PlanFieldSpec Help(PlanFieldSpec f, const char* help) {
  f.help = help;
  return f;
}

PlanFieldSpec RefusedByExecutor(PlanFieldSpec f, const char* instead) {
  f.executor = ExecutorSupport::kRefusedUnlessDefault;
  f.executor_instead = instead;
  return f;
}

std::array<PlanFieldSpec, kNumPlanFields> MakeTable() {
  using F = PlanField;
  using P = ParallelPlan;
  constexpr auto kInt = PlanFieldKind::kInt, kBool = PlanFieldKind::kBool,
                 kEnum = PlanFieldKind::kEnum;
  constexpr auto kAxis = PlanFieldRole::kAxis, kChoice = PlanFieldRole::kChoice;
  auto gpus = [](PlanFieldSpec f) { return Bounded(std::move(f), 1, kMaxGpus, "kMaxGpus"); };
  auto stage = [](PlanFieldSpec f) {
    return Bounded(std::move(f), 1, kMaxStageLayers, "kMaxStageLayers");
  };

  return {
      Always(gpus(Field<&P::dp>(F::kDp, "dp", kInt, kAxis, "data parallel: model replicas"))),
      Always(gpus(Field<&P::tp>(F::kTp, "tp", kInt, kAxis, "tensor parallel (Megatron)"))),
      Always(gpus(Field<&P::pp>(F::kPp, "pp", kInt, kAxis, "pipeline stages"))),
      Always(gpus(Field<&P::cp>(F::kCp, "cp", kInt, kAxis, "context parallel (ring attention)"))),
      gpus(Field<&P::ep>(F::kEp, "ep", kInt, kAxis,
                         "expert parallel, carved out of dp (MoE models only)")),
      Always(Ranged(Field<&P::zero_stage>(F::kZero, "zero", kInt, kAxis,
                                          "ZeRO stage: 0 plain DP, 1 optimizer, 2 + grads, 3 + params"),
                    0, 3, INT_MIN, INT_MAX, "one of: 0, 1, 2, 3")),
      Always(Field<&P::sequence_parallel>(F::kSp, "sp", kBool, kAxis,
                                          "Megatron sequence parallel over the tp group")),
      Always(Bounded(Field<&P::micro_batch>(F::kMbs, "mbs", kInt, kAxis,
                                            "sequences per micro-batch per dp rank"),
                     1, kMaxGlobalBatch, "kMaxGlobalBatch")),
      RecomputeField(),
      Always(Enum<PipelineSchedule, ParsePipelineSchedule>(
          Field<&P::schedule>(F::kSchedule, "schedule", kEnum, kAxis, "pipeline schedule (pp > 1)"),
          AllowedPipelineSchedules())),
      Always(Bounded(Field<&P::virtual_stages>(F::kVpp, "vpp", kInt, kAxis,
                                               "model chunks per pipeline rank (interleaved)"),
                     1, kMaxVirtualStages, "kMaxVirtualStages")),
      RefusedByExecutor(
          Help(Field<&P::tp_comm_overlap>(F::kTpOverlap, "tp_overlap", kBool, kChoice,
                                          "overlap TP communication with compute"),
               "hides TP collectives behind the GEMMs of their pass, which run slower while they "
               "do (comm_overlap_slowdown of the GPU)"),
          "the executor runs each TP collective between its GEMMs, exposed (tp_overlap=0's "
          "timeline)"),
      RefusedByExecutor(
          Help(Field<&P::pp_comm_overlap>(F::kPpOverlap, "pp_overlap", kBool, kChoice,
                                          "overlap an interleaved pipeline's sends with compute"),
               "each chunk's activation and gradient sends run behind the next chunk's compute, "
               "which runs slower while they do (comm_overlap_slowdown of the GPU); only the "
               "pipeline's fill waits for them (Megatron-Core's overlap_p2p_comm)"),
          "the executor receives each message as the chunk that needs it starts, exposed "
          "(pp_overlap=0's timeline)"),
      stage(Field<&P::first_stage_layers>(F::kFirstStageLayers, "first_stage_layers", kInt, kAxis,
                                          "layers of the first pipeline stage (0: even split)")),
      stage(Field<&P::last_stage_layers>(F::kLastStageLayers, "last_stage_layers", kInt, kAxis,
                                         "layers of the last pipeline stage (0: even split)")),
      Help(Field<&P::offload_optimizer>(F::kOffloadOpt, "offload_opt", kBool, kChoice,
                                        "optimizer states and step on the host"),
           "ZeRO-Offload: fp32 master and Adam m, v in host memory, AdamW on the CPU"),
      RefusedByExecutor(
          Help(Field<&P::offload_activations>(F::kOffloadAct, "offload_act", kBool, kChoice,
                                              "activations to the host"),
               "saved activations copied out during the forward, back before the backward"),
          "the executor keeps saved activations on the device (only offload_opt is built)"),
      RefusedByExecutor(
          Help(Field<&P::offload_params>(F::kOffloadParams, "offload_params", kBool, kChoice,
                                         "parameter shard on the host"),
               "ZeRO-Infinity: needs zero=3 and offload_opt"),
          "the executor keeps the ZeRO-3 parameter shard on the device (only offload_opt is "
          "built)"),
      RefusedByExecutor(
          Help(Field<&P::dp_comm_overlap>(F::kDpOverlap, "dp_overlap", kBool, kChoice,
                                          "overlap DP gradient sync with the backward"),
               "hides the gradient sync behind the backward, which runs slower while it does "
               "(dp_overlap_slowdown of the GPU); off: the sync runs after the backward"),
          "the executor starts each group's gradient sync as its backward ends, behind the "
          "rest of the backward (dp_overlap=1's timeline)"),
      Ranged(Help(Field<&P::zero3_prefetch>(F::kPrefetch, "prefetch", kInt, kChoice,
                                            "ZeRO-3 prefetch depth"),
                  "ZeRO-3 all-gathers issued ahead of the compute; 0 exposes every gather, each "
                  "more keeps one more gathered block in memory"),
             0, kMaxZero3Prefetch, INT64_MIN, kMaxZero3Prefetch,
             "an integer from 0 to " + std::to_string(kMaxZero3Prefetch)),
  };
}

}  // namespace

int64_t RecomputeCode(const RecomputePolicy& policy) {
  return static_cast<int64_t>(policy.kind) + kRecomputePeriodUnit * policy.every;
}

RecomputePolicy RecomputeOfCode(int64_t code) {
  RecomputePolicy policy(static_cast<Recompute>(code % kRecomputePeriodUnit));
  policy.every = code / kRecomputePeriodUnit;
  return policy;
}

std::span<const PlanFieldSpec> PlanFields() {
  static const std::array<PlanFieldSpec, kNumPlanFields> kTable = [] {
    std::array<PlanFieldSpec, kNumPlanFields> table = MakeTable();
    for (PlanFieldSpec& f : table) f.default_value = f.get(ParallelPlan{});
    return table;
  }();
  return kTable;
}

const PlanFieldSpec* FindPlanField(std::string_view key) {
  for (const PlanFieldSpec& f : PlanFields())
    if (key == f.key) return &f;
  return nullptr;
}

const std::string& PlanFieldKeyList() {
  static const std::string kKeys = [] {
    std::string s;
    for (const PlanFieldSpec& f : PlanFields()) s += (s.empty() ? "" : ", ") + std::string(f.key);
    return s;
  }();
  return kKeys;
}

std::vector<PlanFieldValue> ParsePlanFields(const std::string& text, const std::string& source) {
  std::vector<PlanFieldValue> out;
  std::array<bool, kNumPlanFields> seen{};
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      throw InputError({source}, item, "expected key=value (e.g. tp=4)");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    const PlanFieldSpec* field = FindPlanField(key);
    if (field == nullptr)
      throw InputError({source}, key, "unknown key; allowed: " + PlanFieldKeyList());
    if (std::exchange(seen[static_cast<size_t>(field->id)], true))
      throw InputError({source}, key, "key given twice; expected each key once");
    out.push_back({field, ParseFieldValue(*field, value, source)});
  }
  return out;
}

int64_t ParseFieldValue(const PlanFieldSpec& f, const std::string& text,
                        const std::string& source) {
  switch (f.kind) {
    case PlanFieldKind::kInt: {
      int64_t out = 0;
      const char* end = text.data() + text.size();
      auto [ptr, ec] = std::from_chars(text.data(), end, out);
      if (ec == std::errc::result_out_of_range ||
          (ec == std::errc() && ptr == end && (out > f.parse_max || out < f.parse_min)))
        throw InputError({source}, f.key,
                         "value " + text + " is out of range; expected " + f.allowed);
      if (ec != std::errc() || ptr != end)
        throw InputError({source}, f.key, "expected an integer, got '" + text + "'");
      return out;
    }
    case PlanFieldKind::kBool:
      if (text == "1" || text == "true" || text == "on" || text == "yes") return 1;
      if (text == "0" || text == "false" || text == "off" || text == "no") return 0;
      throw InputError({source}, f.key,
                       "expected one of: 0, 1, true, false, on, off; got '" + text + "'");
    case PlanFieldKind::kEnum: {
      int64_t out = 0;
      if (!f.parse(text, &out))
        throw InputError({source}, f.key, "expected one of: " + f.allowed + "; got '" + text + "'");
      return out;
    }
  }
  return 0;
}

std::string FormatFieldValue(const PlanFieldSpec& f, int64_t value) {
  switch (f.kind) {
    case PlanFieldKind::kInt: return std::to_string(value);
    case PlanFieldKind::kBool: return value ? "1" : "0";
    case PlanFieldKind::kEnum: return f.name(value);
  }
  return "";
}

void CheckPinValue(const PlanFieldSpec& f, int64_t value, const std::string& source) {
  if (f.kind != PlanFieldKind::kInt || (value >= f.min && value <= f.max)) return;
  if (f.limit != nullptr)
    throw InputError({source}, f.key,
                     "must be >= " + std::to_string(f.min) + ", got " + std::to_string(value));
  throw InputError({source}, f.key, "expected " + f.allowed + "; got " + std::to_string(value));
}

}  // namespace meshplan
