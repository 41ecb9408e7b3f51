// What a framework runs beyond its recompute policies and ZeRO stages (zero_offer_test.cc):
// its tensor, context and expert parallelism (FrameworkSpec::parallelism), ZeRO-3 prefetch
// depths (prefetch), offload (offload), pipeline schedules (schedules), TP overlap and
// sequence parallelism (tp_overlap, sequence_parallel). Each shipped profile's values, Validate's
// rule for each, and the search, which tries only what the framework runs.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/parallel_plan.h"
#include "planner/search/search.h"
#include "tests/cli_run.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

using testing::H100Cluster;
using testing::SpecLlama;
using testing::Training;

// What Validate says of `plan` (a plan string) under `framework`, for a small llama on as
// many GPUs as the plan's mesh: "" when the plan breaks no rule, else each rule it breaks
// as "<constraint>: <message>", one per line.
std::string LabelOf(const char* framework) { return FrameworkLabel(LoadFramework(framework)); }

std::string Refusal(const std::string& plan, const char* framework) {
  TrainingSpec training = Training(8, 512, Precision::kBf16);
  training.framework = LoadFramework(framework);
  const ParallelPlan p = ParsePlanString(plan);
  std::string out;
  for (const PlanViolation& v : Validate(p, SpecLlama(1024, 8, 16, 1536), training,
                                         p.dp * p.tp * p.pp * p.cp))
    out += (out.empty() ? "" : "\n") + v.constraint + ": " + v.message;
  return out;
}

// A search under `framework` on one thread that ranks every plan it finds, not only the best.
SearchResult SearchUnder(const ModelSpec& model, const ClusterSpec& cluster, TrainingSpec training,
                         const char* framework, const std::string& pins = "") {
  training.framework = LoadFramework(framework);
  SearchOptions options;
  options.threads = 1;
  options.top_k = 100000;
  options.space.pins = ParsePlanPins(pins);
  return Search(model, cluster, training, options);
}

// The plans that search ranks.
std::vector<ParallelPlan> Ranked(const ModelSpec& model, const ClusterSpec& cluster,
                                 TrainingSpec training, const char* framework,
                                 const std::string& pins = "") {
  std::vector<ParallelPlan> out;
  for (const RankedPlan& r : SearchUnder(model, cluster, training, framework, pins).top)
    out.push_back(r.plan);
  return out;
}

// The candidates `result` removed by `rule` first.
int64_t Removed(const SearchResult& result, PlanConstraint rule) {
  return result.constraints[static_cast<int>(rule)].removed;
}

const char* const kTorchtitan = "torchtitan 9dec370ad (2024-12, PyTorch 2.6 nightly, eager)";

TEST_CASE("each profile says what its software runs", "[planner][framework][offer]") {
  const auto offload = [](const char* name) { return OffloadCombosText(LoadFramework(name).offload); };
  CHECK(offload("megatron-core") == "act");  // cpu_offloading; no optimizer offload in core_r0.8.0
  CHECK(offload("nemo") == "act");
  for (const char* none : {"megatron-lm-2021", "megatron-lm-2022", "torchtitan-2024-04"})
    CHECK(offload(none) == "");
  CHECK(offload("torchtitan") == "opt+params");  // FSDP2's CPUOffloadPolicy
  CHECK(offload("pytorch") == "act, opt+params, act+opt+params");
  CHECK(offload("deepspeed") == "act, opt, act+opt, opt+params, act+opt+params");
  CHECK(offload("meshplan") == "act, opt, act+opt, params, act+params, opt+params, act+opt+params");
  CHECK(LoadFramework("megatron-core").offload.act_alone);
  CHECK(LoadFramework("nemo").offload.act_alone);
  CHECK_FALSE(LoadFramework("deepspeed").offload.act_alone);

  const auto parallelism = [](const char* name) {
    return OfferedParallelismText(LoadFramework(name).parallelism);
  };
  for (const char* all : {"megatron-core", "nemo", "meshplan"}) CHECK(parallelism(all) == "tp, cp, ep");
  for (const char* tp_only : {"megatron-lm-2021", "megatron-lm-2022", "torchtitan-2024-04"})
    CHECK(parallelism(tp_only) == "tp");
  CHECK(parallelism("torchtitan") == "tp, cp");  // no MoE model at 9dec370ad
  CHECK(parallelism("pytorch") == "tp, cp");
  CHECK(parallelism("deepspeed") == "ep");  // no training TP in v0.14; Ulysses is not CP
  const auto prefetch = [](const char* name) { return OfferedPrefetchText(LoadFramework(name).prefetch); };
  for (const char* fsdp : {"torchtitan", "torchtitan-2024-04", "pytorch", "nemo"})
    CHECK(prefetch(fsdp) == "1");  // FSDP's one block ahead, always on
  CHECK(prefetch("deepspeed") == "0, 1, 2, 3, 4");  // stage3_prefetch_bucket_size
  CHECK(prefetch("meshplan") == "0, 1, 2, 3, 4");

  const auto schedules = [](const char* name) {
    return OfferedSchedulesText(LoadFramework(name).schedules);
  };
  for (const char* megatron : {"megatron-core", "nemo", "megatron-lm-2021", "megatron-lm-2022"})
    CHECK(schedules(megatron) == "1f1b, interleaved");
  CHECK(schedules("torchtitan") == "gpipe, 1f1b, interleaved");
  CHECK(schedules("pytorch") == "gpipe, 1f1b, interleaved");
  CHECK(schedules("deepspeed") == "1f1b");
  CHECK(schedules("torchtitan-2024-04") == "");  // no pipeline parallelism
  CHECK(schedules("meshplan") == "gpipe, 1f1b, interleaved, zb_h1");

  const auto overlap = [](const char* name) { return LoadFramework(name).tp_overlap; };
  CHECK(overlap("megatron-core") == TpOverlapOffer::kWithSp);  // userbuffers need sp
  CHECK(overlap("nemo") == TpOverlapOffer::kWithSp);
  for (const char* none : {"megatron-lm-2021", "megatron-lm-2022", "torchtitan",
                           "torchtitan-2024-04", "pytorch", "deepspeed"})
    CHECK(overlap(none) == TpOverlapOffer::kNone);
  CHECK(overlap("meshplan") == TpOverlapOffer::kAny);
  // Megatron-Core overlaps an interleaved pipeline's sends (overlap_p2p_comm); the others'
  // pipelines send between chunks.
  const auto pp_overlap = [](const char* name) { return LoadFramework(name).pp_overlap; };
  CHECK(pp_overlap("megatron-core") == PpOverlapOffer::kInterleaved);
  CHECK(pp_overlap("nemo") == PpOverlapOffer::kInterleaved);
  for (const char* none : {"megatron-lm-2021", "megatron-lm-2022", "torchtitan",
                           "torchtitan-2024-04", "pytorch", "deepspeed", "meshplan"})
    CHECK(pp_overlap(none) == PpOverlapOffer::kNone);
  // Megatron-LM from 2022 and Transformer Engine issue a column-parallel linear's backward TP
  // collectives behind its GEMMs; Megatron-LM 2021 and eager DTensor run them in line.
  const auto tp_backward = [](const char* name) { return LoadFramework(name).tp_backward_overlap; };
  for (const char* async : {"megatron-lm-2022", "megatron-core", "nemo"})
    CHECK(tp_backward(async) == TpBackwardOverlap::kColumnGemms);
  for (const char* none : {"megatron-lm-2021", "torchtitan", "torchtitan-2024-04", "pytorch",
                           "deepspeed", "meshplan"})
    CHECK(tp_backward(none) == TpBackwardOverlap::kNone);
  const auto sp = [](const char* name) { return LoadFramework(name).sequence_parallel; };
  CHECK(sp("torchtitan") == SpOffer::kAlways);  // SequenceParallel norms
  CHECK(sp("torchtitan-2024-04") == SpOffer::kAlways);
  CHECK(sp("megatron-core") == SpOffer::kOptional);  // --sequence-parallel is a flag
  CHECK(sp("megatron-lm-2022") == SpOffer::kOptional);
  CHECK(sp("megatron-lm-2021") == SpOffer::kNever);  // before Korthikanti et al. 2022
}

TEST_CASE("Validate refuses what the framework does not run, with what it runs",
          "[planner][framework][offer]") {
  const std::string torchtitan = kTorchtitan;
  const std::string act_alone =
      "offload_offered: offload_act=1 is not offered by megatron-core core_r0.8.0 with pipeline "
      "parallelism or recompute; allowed there: nothing offloaded (it needs pp=1 and "
      "recompute=none)";
  struct Case {
    const char* plan;
    const char* framework;
    std::string refusal;  // "": valid
  };
  const Case cases[] = {
      // Tensor, context and expert parallelism.
      {"dp=2,tp=2", "deepspeed",
       "parallelism_offered: tp=2: deepspeed 0.14 runs no tensor parallelism; allowed: tp=1"},
      {"tp=2,cp=2", "deepspeed",
       "parallelism_offered: tp=2,cp=2: deepspeed 0.14 runs no tensor or context parallelism; "
       "allowed: tp=1, cp=1"},
      {"dp=2,cp=2,zero=3", "torchtitan-2024-04",
       "parallelism_offered: cp=2: torchtitan-2024-04 157a12c56 (2024-04, PyTorch 2.4 nightly, "
       "eager) runs no context parallelism; allowed: cp=1"},
      {"dp=2,cp=2,zero=3", "torchtitan", ""},
      {"dp=2,tp=2,cp=2", "megatron-lm-2021",
       "parallelism_offered: cp=2: megatron-lm-2021 v2.x (SC21 artifact) runs no context "
       "parallelism; allowed: cp=1"},
      // ZeRO-3 prefetch depths; without zero=3 (or with one replica) nothing is gathered.
      {"dp=2,zero=3,prefetch=0", "torchtitan",
       "prefetch_offered: prefetch=0 with zero=3 is not offered by " + torchtitan +
           "; allowed: prefetch=1"},
      {"dp=2,zero=3,prefetch=0", "deepspeed", ""},
      {"dp=2,zero=2,prefetch=0", "pytorch", ""},
      {"zero=3,prefetch=2", "pytorch", ""},
      // Offload.
      {"dp=2,zero=3,offload_act=1", "torchtitan",
       "offload_offered: offload_act=1 is not offered by " + torchtitan +
           "; allowed: opt+params (or nothing offloaded)"},
      {"dp=2,zero=3,offload_opt=1,offload_params=1", "torchtitan", ""},
      {"dp=2,zero=1,offload_act=1", "megatron-core", ""},
      {"dp=2,zero=1,offload_act=1,offload_opt=1", "megatron-core",
       "offload_offered: offload_act=1,offload_opt=1 is not offered by megatron-core "
       "core_r0.8.0; allowed: act (or nothing offloaded)"},
      {"dp=2,zero=1,recompute=full,offload_act=1", "megatron-core", act_alone},
      {"pp=2,offload_act=1", "megatron-core", act_alone},
      {"dp=2,offload_act=1", "megatron-lm-2021",
       "offload_offered: offload_act=1 is not offered by megatron-lm-2021 v2.x (SC21 artifact); "
       "allowed: nothing offloaded"},
      // Pipeline schedules; one stage runs none, so nothing to refuse there.
      {"pp=2,schedule=zb_h1", "megatron-core",
       "schedule_offered: schedule=zb_h1 is not offered by megatron-core core_r0.8.0; allowed: "
       "1f1b, interleaved"},
      {"pp=2,schedule=1f1b", "megatron-core", ""},
      {"pp=1,schedule=gpipe", "megatron-core", ""},
      {"pp=2", "torchtitan-2024-04",
       "schedule_offered: pp=2: torchtitan-2024-04 157a12c56 (2024-04, PyTorch 2.4 nightly, "
       "eager) runs no pipeline parallelism; allowed: pp=1"},
      // TP overlap and sequence parallelism; with tp=1 nothing to shard or overlap.
      {"dp=2,tp=2,tp_overlap=1", "megatron-core",
       "tp_overlap_offered: tp_overlap=1 is not offered by megatron-core core_r0.8.0 without "
       "sequence parallelism; allowed: tp_overlap=1 with sp=1, or tp_overlap=0"},
      {"dp=2,tp=2,sp=1,tp_overlap=1", "megatron-core", ""},
      {"dp=2,tp=2,sp=1,zero=3,tp_overlap=1", "torchtitan",
       "tp_overlap_offered: tp_overlap=1 is not offered by " + torchtitan +
           "; allowed: tp_overlap=0"},
      {"dp=2,tp=2,zero=3", "torchtitan",
       "sp_offered: sp=0 with tp=2 is not offered by " + torchtitan +
           ": its tensor parallelism always shards the norms over the sequence; allowed: sp=1"},
      {"dp=2,zero=3,tp_overlap=1", "torchtitan", ""},
      {"dp=2,tp=2,sp=1", "megatron-lm-2021",
       "sp_offered: sp=1 with tp=2 is not offered by megatron-lm-2021 v2.x (SC21 artifact): its "
       "tensor parallelism never shards the norms over the sequence; allowed: sp=0"},
      {"dp=2,tp=2", "megatron-lm-2021", ""},
      {"dp=2,tp=2,sp=1", "megatron-lm-2022", ""},
      // The overlap of an interleaved pipeline's sends.
      {"pp=2,schedule=interleaved,vpp=2,pp_overlap=1", "megatron-core", ""},
      {"pp=2,pp_overlap=1", "megatron-core",
       "pp_overlap_offered: pp_overlap=1 needs schedule=interleaved with pp > 1 (got "
       "schedule=1f1b, pp=2): only interleaved chunks have a next chunk to hide the sends "
       "behind; allowed: pp_overlap=0, or schedule=interleaved"},
      {"pp=2,schedule=interleaved,vpp=2,pp_overlap=1", "meshplan",
       "pp_overlap_offered: pp_overlap=1 is not offered by " + LabelOf("meshplan") +
           ": its pipeline sends run between the chunks; allowed: pp_overlap=0"},
  };
  for (const Case& c : cases) {
    INFO(c.plan << " under " << c.framework);
    CHECK(Refusal(c.plan, c.framework) == c.refusal);
  }
}

TEST_CASE("estimate names the profiles that run the refused plan",
          "[planner][framework][offer][zero][cli]") {
  struct Case {
    const char* args;
    const char* refusal;   // "": not checked
    const char* profiles;  // the "profiles that offer it" line
  };
  const Case cases[] = {
      {"--plan dp=8,zero=3", "zero=3 is not offered by megatron-core core_r0.8.0; allowed: 0, 1",
       "deepspeed, meshplan, nemo, pytorch, torchtitan, torchtitan-2024-04"},
      // Two rules refused: the profiles that run both.
      {"--framework torchtitan --plan dp=8,zero=1,recompute=selective", "",
       "megatron-core, megatron-lm-2022, meshplan, nemo"},
      // nemo runs FSDP and activation offload without a pipeline; megatron-core has no ZeRO-3.
      {"--framework torchtitan --plan dp=8,zero=3,offload_act=1", "",
       "deepspeed, meshplan, nemo, pytorch"},
      {"--plan dp=4,pp=2,zero=1,schedule=zb_h1", "", "meshplan"},
      {"--framework deepspeed --plan dp=4,tp=2",
       "tp=2: deepspeed 0.14 runs no tensor parallelism; allowed: tp=1",
       "megatron-core, megatron-lm-2021, megatron-lm-2022, meshplan, nemo, pytorch"},
  };
  for (const Case& c : cases) {
    const test::CliResult r = test::RunMeshplan(std::string("estimate --cluster 8xH100 ") + c.args);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(c.refusal) &&
                             Catch::Contains(std::string("profiles that offer it: ") + c.profiles +
                                             " (--framework NAME)"));
  }
}

TEST_CASE("the search offloads only as the framework can", "[planner][search][offer]") {
  // About 6.5e9 parameters on 2 H100 (whose hardware file knows the host): some plans fit
  // only by offloading.
  const ModelSpec model = SpecLlama(4096, 16, 32, 11008);
  const ClusterSpec cluster = LoadCluster("2xH100");
  const TrainingSpec training = Training(16, 4096);
  const auto offloading = [&](const char* framework) {
    std::vector<ParallelPlan> out;
    for (const ParallelPlan& p : Ranked(model, cluster, training, framework)) {
      INFO(framework << ": " << ToShortPlanString(p));
      CHECK(OffloadOffered(LoadFramework(framework).offload, p));
      if (p.offloads()) out.push_back(p);
    }
    return out;
  };
  CHECK(!offloading("deepspeed").empty());
  CHECK(!offloading("meshplan").empty());
  const std::vector<ParallelPlan> megatron = offloading("megatron-core");
  CHECK(!megatron.empty());  // activations, where it can
  for (const ParallelPlan& p : megatron) {
    CHECK_FALSE(p.offload_optimizer);
    CHECK(p.pp == 1);
    CHECK(p.recompute.kind == Recompute::kNone);
  }
  const std::vector<ParallelPlan> torchtitan = offloading("torchtitan");
  CHECK(!torchtitan.empty());  // parameters and optimizer with FSDP2
  for (const ParallelPlan& p : torchtitan) CHECK_FALSE(p.offload_activations);
}

TEST_CASE("the search tries the schedules the framework runs", "[planner][search][offer]") {
  const ModelSpec model = SpecLlama(1024, 8, 16, 1536);
  const TrainingSpec training = Training(16, 512, Precision::kBf16);
  for (const char* framework : {"megatron-core", "deepspeed", "meshplan"}) {
    INFO(framework);
    std::vector<bool> seen(4, false);
    for (const ParallelPlan& p : Ranked(model, H100Cluster(1, 8), training, framework, "pp=2"))
      seen[static_cast<int>(p.schedule)] = true;
    for (int s = 0; s < 4; ++s) CHECK(seen[s] == LoadFramework(framework).schedules.offers(s));
  }
  // The grid holds only those: none is left for Validate to refuse.
  const auto pipelined = [&](const char* framework) {
    return SearchUnder(model, H100Cluster(1, 8), training, framework, "pp=2");
  };
  CHECK(Removed(pipelined("megatron-core"), PlanConstraint::kScheduleOffered) == 0);
  // No pipeline parallelism: every pipelined candidate is refused by schedule_offered.
  const SearchResult none = pipelined("torchtitan-2024-04");
  CHECK(none.top.empty());
  CHECK(Removed(none, PlanConstraint::kScheduleOffered) > 0);
}

TEST_CASE("the search splits the model only as the framework can", "[planner][search][offer]") {
  const ModelSpec model = SpecLlama(1024, 8, 16, 1536);
  const TrainingSpec training = Training(16, 512, Precision::kBf16);
  const auto split = [&](const char* framework) {
    int tp = 0, cp = 0;
    for (const ParallelPlan& p : Ranked(model, H100Cluster(1, 8), training, framework)) {
      tp += p.tp > 1;
      cp += p.cp > 1;
    }
    return std::pair{tp, cp};
  };
  CHECK(split("deepspeed") == std::pair{0, 0});
  CHECK(split("megatron-lm-2021").second == 0);
  const auto [tp, cp] = split("meshplan");
  CHECK(tp > 0);
  CHECK(cp > 0);
  // The meshes stay in the grid, refused by their own rule, so the search says why.
  const SearchResult result = SearchUnder(model, H100Cluster(1, 8), training, "deepspeed", "tp=2");
  CHECK(result.top.empty());
  CHECK(Removed(result, PlanConstraint::kParallelismOffered) > 0);
}

TEST_CASE("the search drops ZeRO-3 prefetching only where the framework can",
          "[planner][search][offer]") {
  // About 6.5e9 parameters on 4 H100: some ZeRO-3 plans fit only without a block in flight.
  const ModelSpec model = SpecLlama(4096, 32, 32, 11008);
  const TrainingSpec training = Training(64, 4096);
  const auto prefetch0 = [&](const char* framework) {
    const SearchResult result = SearchUnder(model, H100Cluster(1, 4), training, framework);
    int ranked = 0;
    for (const RankedPlan& r : result.top) ranked += r.plan.zero3_prefetch == 0;
    return std::pair{result.knobs.prefetch0_tried, ranked};
  };
  const auto [tried, ranked] = prefetch0("meshplan");
  CHECK(tried > 0);
  CHECK(ranked > 0);
  CHECK(prefetch0("torchtitan") == std::pair<int64_t, int>{0, 0});
  // Pinned, the depth FSDP cannot run is refused on the ZeRO-3 plans alone.
  const SearchResult pinned =
      SearchUnder(model, H100Cluster(1, 4), training, "torchtitan", "prefetch=0");
  CHECK_FALSE(pinned.top.empty());  // zero=0 and 2 plans gather nothing ahead
  for (const RankedPlan& r : pinned.top) CHECK(r.plan.zero_stage != 3);
  CHECK(Removed(pinned, PlanConstraint::kPrefetchOffered) > 0);
}

TEST_CASE("the search runs TP as the framework does", "[planner][search][offer]") {
  const ModelSpec model = SpecLlama(4096, 32, 8, 11008);
  const TrainingSpec training = Training(16, 2048, Precision::kBf16);
  const auto ranked = [&](const char* framework) {
    return Ranked(model, H100Cluster(1, 8), training, framework, "tp=4");
  };
  int overlapped = 0;
  for (const ParallelPlan& p : ranked("meshplan")) overlapped += p.tp_comm_overlap;
  CHECK(overlapped > 0);  // where every choice is offered, overlap wins somewhere here
  int megatron_overlapped = 0;
  for (const ParallelPlan& p : ranked("megatron-core")) {
    INFO(ToShortPlanString(p));
    if (p.tp_comm_overlap) CHECK(p.sequence_parallel);
    megatron_overlapped += p.tp_comm_overlap;
  }
  CHECK(megatron_overlapped > 0);
  for (const ParallelPlan& p : ranked("torchtitan")) {
    INFO(ToShortPlanString(p));
    CHECK_FALSE(p.tp_comm_overlap);
    CHECK(p.sequence_parallel);
  }
  const std::vector<ParallelPlan> old = ranked("megatron-lm-2021");
  CHECK_FALSE(old.empty());
  for (const ParallelPlan& p : old) CHECK_FALSE(p.sequence_parallel);
}

}  // namespace
}  // namespace meshplan
