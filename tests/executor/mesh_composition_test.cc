// Composed meshes: dp x cp x pp x tp together (with sp and ZeRO on the dp x cp group),
// each against the single-process run of the same global batch. Every rank's weights are
// put back together (tp shards by PlaceTpShard, pp stages by group name) and compared;
// every rank must log the same global-batch loss.
#include "tests/executor/rank_threads.h"  // first: LibTorch before Catch2

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "executor/data.h"
#include "executor/model/param_layout.h"
#include "executor/trainer.h"
#include "planner/names.h"
#include "tests/executor/test_training.h"
#include "tests/executor/test_util.h"

namespace meshplan {
namespace {

using test::Trained;

// 2*cp and, with sp, tp * 2*cp divide the sequence.
TrainingSpec Training(int64_t global_batch) { return test::TinyTraining(global_batch, 16); }

Trained Train(const ModelSpec& m, const TrainingSpec& training, const DeviceMesh& mesh) {
  return test::TrainSteps(m, training, mesh, /*steps=*/3, /*data_seed=*/9);
}

struct MeshCase {
  int64_t dp, cp, pp, tp;
  bool sp;
  int zero;
  PipelineSchedule schedule;
  int64_t v;
  Recompute recompute;
  int64_t microbatches;  // per dp rank, micro-batch 1
};

std::string Describe(const MeshCase& c) {
  return "dp=" + std::to_string(c.dp) + " cp=" + std::to_string(c.cp) + " pp=" +
         std::to_string(c.pp) + " tp=" + std::to_string(c.tp) + (c.sp ? " sp" : "") +
         " zero=" + std::to_string(c.zero) + " " + ToString(c.schedule) +
         " v=" + std::to_string(c.v) + " m=" + std::to_string(c.microbatches) + " " +
         ToString(c.recompute);
}

TEST_CASE("composed meshes equal the single-process run", "[executor][mesh_composition]") {
  using S = PipelineSchedule;
  using R = Recompute;
  const MeshCase c = GENERATE(
      MeshCase{2, 1, 2, 2, false, 1, S::k1F1B, 1, R::kNone, 2},        // dp x pp x tp, ZeRO-1
      MeshCase{1, 2, 1, 2, true, 0, S::k1F1B, 1, R::kSelective, 2},    // cp x tp with sp
      MeshCase{1, 2, 1, 2, false, 0, S::k1F1B, 1, R::kFull, 1},        // cp x tp
      MeshCase{1, 2, 2, 2, true, 2, S::kInterleaved, 2, R::kNone, 2},  // cp x pp x tp, ZeRO-2
      MeshCase{2, 2, 1, 2, true, 3, S::k1F1B, 1, R::kFull, 1});        // dp x cp x tp, ZeRO-3
  INFO(Describe(c));
  ModelSpec m = test::TinySpec(false, 2);  // H=4, K=2: tp=2 keeps GQA (2 query heads per kv)
  m.layers = 4;
  const TrainingSpec training = Training(c.dp * c.microbatches);
  ParallelPlan plan;
  plan.dp = c.dp;
  plan.cp = c.cp;
  plan.pp = c.pp;
  plan.tp = c.tp;
  plan.sequence_parallel = c.sp;
  plan.zero_stage = c.zero;
  plan.schedule = c.schedule;
  plan.virtual_stages = c.v;
  plan.recompute = c.recompute;

  ParallelPlan single;
  single.recompute = c.recompute;
  const DeviceMesh one(single, 0, nullptr);
  const Trained want = Train(m, training, one);
  const std::map<std::string, at::Tensor> want_params = test::ParamsByName(want);
  std::map<std::string, const ParamGroup*> full_groups;
  for (const ParamGroup& group : want.layout.groups) full_groups[group.name] = &group;

  std::vector<Trained> got(static_cast<size_t>(plan.world_size()));
  test::OnMesh(plan, [&](const DeviceMesh& mesh) {
    got[static_cast<size_t>(mesh.world_rank())] = Train(m, training, mesh);
  });

  for (size_t r = 0; r < got.size(); ++r) {
    INFO("rank " << r);
    REQUIRE(got[r].losses.size() == want.losses.size());
    for (size_t s = 0; s < want.losses.size(); ++s)
      CHECK(got[r].losses[s] == Approx(want.losses[s]).epsilon(1e-5).margin(1e-6));
  }
  // Each weight replica (dp x cp index) reassembles the whole model from its pp x tp ranks.
  const double step_tol = 1e-3 * training.learning_rate;
  for (int64_t d = 0; d < c.dp; ++d)
    for (int64_t k = 0; k < c.cp; ++k) {
      std::map<std::string, at::Tensor> assembled;
      for (const Trained& t : got) {
        if (t.coords[MeshDim::kDp] != d || t.coords[MeshDim::kCp] != k) continue;
        for (size_t g = 0; g < t.layout.groups.size(); ++g) {
          const std::string& name = t.layout.groups[g].name;
          REQUIRE(full_groups.count(name) == 1);
          const ParamGroup& full = *full_groups.at(name);
          if (assembled.count(name) == 0)
            assembled[name] = at::full({full.numel}, std::nan(""), at::kFloat);
          PlaceTpShard(t.layout.groups[g], t.params[g], full, assembled[name]);
        }
      }
      for (const auto& [name, tensor] : want_params) {
        INFO("replica dp=" << d << " cp=" << k << " group " << name);
        REQUIRE(assembled.count(name) == 1);  // some stage holds it
        test::RequireClose(assembled.at(name), tensor, 1e-5, step_tol,
                           Describe(c) + ", group " + name);
      }
    }
}

}  // namespace
}  // namespace meshplan
