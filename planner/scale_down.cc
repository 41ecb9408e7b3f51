#include "planner/scale_down.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "planner/executor_support.h"
#include "planner/input_error.h"
#include "planner/names.h"
#include "planner/parallel_plan.h"
#include "planner/plan_fields.h"
#include "planner/stage_layers.h"

namespace meshplan {
namespace {

constexpr int64_t kHeadDim = 32;          // D of the tiny model (tiny-llama's)
constexpr int64_t kLayersPerChunk = 2;    // layers per pipeline chunk
constexpr int64_t kExpertsPerEpRank = 2;  // routed experts each ep rank holds
constexpr int64_t kSeqLen = 64;           // tokens per sequence
constexpr int64_t kVocab = 1024;
constexpr int64_t kSteps = 4;

int64_t RoundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Divides the mesh (dp, cp, tp, pp in that order of preference) by world / nproc, a prime
// factor at a time: first keeping every factor that was above 1 at 2 or more, then down to 1.
void ReduceMesh(ParallelPlan& plan, int64_t nproc) {
  int64_t excess = plan.world_size() / nproc;
  int64_t* dims[] = {&plan.dp, &plan.cp, &plan.tp, &plan.pp};
  for (int64_t floor : {2, 1})
    for (int64_t* d : dims)
      for (int64_t p = 2; p <= excess; ++p)
        while (excess % p == 0 && *d % p == 0 && *d / p >= floor) *d /= p, excess /= p;
}

ModelSpec TinyModelLike(const ModelSpec& big, const ParallelPlan& plan, int64_t seq) {
  ModelSpec m;
  m.name = big.name + "-shrunk";
  m.block = big.block;
  m.tied_embeddings = big.tied_embeddings;
  m.qk_norm = big.qk_norm;
  m.ffn_activation = big.ffn_activation;
  const bool mha = big.kv_heads == big.heads || big.mla.enabled();
  // K divisible by tp; H = K (multi-head) or K times the big model's group size up to 4;
  // at least 8 query heads, as tiny-llama, so attention is not a toy.
  const int64_t group = mha ? 1 : std::min<int64_t>(big.heads / big.kv_heads, 4);
  m.kv_heads = RoundUp(std::max<int64_t>(8 / group, 1), plan.tp);
  m.heads = m.kv_heads * group;
  m.hidden = m.heads * kHeadDim;
  if (big.attention_head_dim > 0) m.attention_head_dim = kHeadDim;
  m.ffn_hidden = big.block == BlockKind::kGpt ? 4 * m.hidden
                                              : RoundUp(m.hidden * 8 / 3, 16 * plan.tp);
  m.layers = plan.pp * plan.virtual_stages * kLayersPerChunk;
  m.vocab_size = RoundUp(kVocab, plan.tp);
  m.max_seq = seq;
  if (big.moe.enabled()) {
    m.moe = big.moe;
    m.moe.experts = kExpertsPerEpRank * plan.ep;
    m.moe.top_k = std::min(big.moe.top_k, m.moe.experts);
    m.moe.shared_experts = std::min<int64_t>(big.moe.shared_experts, 1);
    m.moe.expert_ffn_hidden = RoundUp(m.hidden, 16 * plan.tp);
    m.moe.dense_layers = std::min<int64_t>(big.moe.dense_layers, 1);
  }
  return m;
}

}  // namespace

ScaledDown ScaleDown(const PlanFile& big, const ClusterSpec& cluster, bool cpu) {
  const int64_t nproc = cluster.world_size();
  const int64_t world = big.plan.world_size();
  if (nproc < 1 || nproc > world || world % nproc != 0)
    throw InputError({"<command line>"}, "--nproc",
                     fmt::format("{} ranks cannot keep the layout of {} ({} ranks): expected a "
                                 "divisor of {}",
                                 nproc, ToPlanString(big.plan), world, world));
  ScaledDown out;
  auto changed = [&out](const std::string& what, const auto& from, const auto& to) {
    if (from != to) out.changes.push_back(fmt::format("{} {} -> {}", what, from, to));
  };

  ParallelPlan& plan = out.plan.plan;
  plan = big.plan;
  ReduceMesh(plan, nproc);
  const bool fold_cp = big.model.moe.enabled() && plan.cp > 1;  // the executor routes per
  if (fold_cp) plan.dp *= plan.cp, plan.cp = 1;                   // micro-batch: cp=1
  plan.ep = std::gcd(big.plan.ep, plan.dp);
  changed("dp", big.plan.dp, plan.dp);
  changed("cp", big.plan.cp, plan.cp);
  if (fold_cp) out.changes.push_back("(cp's ranks go to dp: the executor runs experts with cp=1)");
  changed("tp", big.plan.tp, plan.tp);
  changed("pp", big.plan.pp, plan.pp);
  changed("ep", big.plan.ep, plan.ep);
  if (plan.tp == 1 && plan.sequence_parallel) {
    plan.sequence_parallel = false;
    out.changes.push_back("sp off (tp is 1)");
  }
  if (plan.pp == 1 && big.plan.pp > 1) {
    plan.schedule = PipelineSchedule::k1F1B;
    plan.virtual_stages = 1;
    changed("schedule", std::string(ToString(big.plan.schedule)), std::string(ToString(plan.schedule)));
  }
  if (HasUnevenStages(plan)) {
    SetStageSplit(&plan, StageSplit{});
    out.changes.push_back("pipeline stages even (the tiny model has 2 layers per chunk)");
  }
  // What meshplan's executor does not build (planner/executor_support.h), made runnable.
  if (plan.recompute.kind == Recompute::kOp) {
    plan.recompute = RecomputePolicy(Recompute::kSelective);
    out.changes.push_back("recompute op -> selective (the executor recomputes by block part)");
  }
  if (plan.schedule == PipelineSchedule::kZeroBubbleH1) {
    plan.schedule = PipelineSchedule::k1F1B;
    out.changes.push_back("schedule zb_h1 -> 1f1b (the executor does not split weight gradients)");
  }
  for (const PlanFieldSpec& f : PlanFields())
    if (f.executor == ExecutorSupport::kRefusedUnlessDefault && !f.is_default(plan)) {
      out.changes.push_back(fmt::format("{} {} -> {} (the executor: {})", f.key,
                                        FormatFieldValue(f, f.get(plan)),
                                        FormatFieldValue(f, f.default_value), f.executor_instead));
      f.set(plan, f.default_value);
    }
  plan.micro_batch = 1;
  changed("mbs", big.plan.micro_batch, plan.micro_batch);

  TrainingSpec& t = out.plan.training;
  t = TrainingSpec{};
  t.seq_len = kSeqLen;
  while (t.seq_len % (2 * plan.cp) != 0 || (plan.sequence_parallel && t.seq_len % plan.tp != 0))
    t.seq_len += kSeqLen;
  t.global_batch = plan.dp * plan.micro_batch * (plan.pp > 1 ? 2 * plan.pp : 2);
  t.precision = cpu ? Precision::kFp32
                    : big.training.precision == Precision::kFp8 ? Precision::kBf16
                                                                : big.training.precision;
  t.steps = kSteps;
  t.learning_rate = big.training.learning_rate;
  t.moe_aux_loss_coef = big.training.moe_aux_loss_coef;
  changed("seq", big.training.seq_len, t.seq_len);
  changed("global batch", big.training.global_batch, t.global_batch);
  changed("precision", std::string(ToString(big.training.precision)), std::string(ToString(t.precision)));
  changed("framework", big.training.framework.name, t.framework.name);

  out.plan.model = TinyModelLike(big.model, plan, t.seq_len);
  ModelSpec& m = out.plan.model;
  auto drop = [&out](bool& feature, const char* what) {
    if (feature) out.changes.push_back(fmt::format("{} off (the executor's llama block has none)", what));
    feature = false;
  };
  drop(m.qk_norm, "qk_norm");
  drop(m.moe.router_bias, "moe.router_bias");
  if (big.model.mla.enabled())
    out.changes.push_back("mla -> multi-head attention (the executor builds no MLA)");
  if (!m.gated_ffn()) {
    out.changes.push_back(fmt::format("ffn_activation {} -> swiglu (the executor's FFN is SwiGLU)",
                                      ToString(m.ffn_activation)));
    m.ffn_activation = FfnActivation::kSwiGlu;
  }
  if (m.block != BlockKind::kLlama) {
    m.block = BlockKind::kLlama;
    out.changes.push_back("block gpt -> llama (the executor builds llama blocks only)");
  }
  if (plan.pp > 1 && m.tied_embeddings) {
    m.tied_embeddings = false;
    out.changes.push_back("embeddings untied (the executor keeps no weight across stages)");
  }
  out.plan.cluster = cluster;
  const std::vector<PlanViolation> violations =
      Validate(plan, out.plan.model, t, nproc, cluster.gpus_per_node);
  if (!violations.empty())
    throw InputError({"<command line>"}, "--nproc",
                     fmt::format("the plan scaled to {} ranks ({}) breaks a rule: {} [{}]", nproc,
                                 ToPlanString(plan), violations[0].message,
                                 violations[0].constraint));
  if (const std::vector<std::string> refused = ExecutorLimitations(out.plan); !refused.empty())
    throw InputError({"<command line>"}, "--nproc",
                     fmt::format("the plan scaled to {} ranks ({}) is not one meshplan run "
                                 "trains: {}",
                                 nproc, ToPlanString(plan), refused[0]));
  return out;
}

}  // namespace meshplan
