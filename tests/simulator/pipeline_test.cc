// Pipeline schedules with free communication and equal stages (no embedding, head or
// optimizer work): the textbook bubble fractions; and with the embedding and a heavy head
// in their stages, the analytic bubble (the other stages' work) against the simulated one.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <tuple>

#include "planner/cost/step_time.h"
#include "planner/names.h"
#include "planner/pipeline_schedule.h"
#include "sim_test_util.h"
#include "simulator/simulate.h"

namespace meshplan {
namespace {

SimResult SimulatePipeline(int64_t pp, int64_t m, PipelineSchedule schedule, int64_t vpp = 1,
                           int64_t layers = 16) {
  const ModelSpec model = test::TinyLlama(layers);
  const ClusterSpec cluster = test::FreeNetwork(1, pp);
  ParallelPlan plan;
  plan.pp = pp;
  plan.schedule = schedule;
  plan.virtual_stages = vpp;
  const TrainingSpec training = test::Training(m);
  REQUIRE(Validate(plan, model, training, cluster.world_size()).empty());
  const StepWork work = test::EqualStages(BuildStepWork(model, training, plan));
  return SimulateWork(work, model, cluster, training.precision, {.timeline = false});
}

double BubbleFraction(const SimResult& r) { return r.time.bubble_s / r.time.total_s; }

TEST_CASE("every schedule orders each (micro-batch, chunk, pass) exactly once",
          "[simulator][pipeline]") {
  const auto schedule = GENERATE(PipelineSchedule::kGpipe, PipelineSchedule::k1F1B,
                                 PipelineSchedule::kInterleaved, PipelineSchedule::kZeroBubbleH1);
  const int64_t pp = 4, m = 8;
  const int64_t v = schedule == PipelineSchedule::kInterleaved ? 3 : 1;
  const int64_t passes = SplitsWeightGradients(schedule) ? 3 : 2;
  for (int64_t stage = 0; stage < pp; ++stage) {
    INFO("schedule " << ToString(schedule) << " stage " << stage);
    const std::vector<ScheduleItem> order = StageOrder(schedule, pp, v, m, stage);
    REQUIRE(order.size() == static_cast<size_t>(passes * m * v));
    std::set<std::tuple<int, int, int>> seen;
    for (const ScheduleItem& item : order) {
      CHECK(seen.insert({item.microbatch, item.chunk, static_cast<int>(item.pass)}).second);
      // B after its F, W after its B.
      if (item.pass == PipelinePass::kBackward)
        CHECK(seen.count({item.microbatch, item.chunk, static_cast<int>(PipelinePass::kForward)}));
      if (item.pass == PipelinePass::kWeight)
        CHECK(seen.count({item.microbatch, item.chunk, static_cast<int>(PipelinePass::kBackward)}));
    }
  }
}

TEST_CASE("zb_h1 defers stage r's weight gradients by r backward passes",
          "[simulator][pipeline]") {
  const int64_t pp = 4, m = 8;
  for (int64_t stage = 0; stage < pp; ++stage) {
    const std::vector<ScheduleItem> order =
        StageOrder(PipelineSchedule::kZeroBubbleH1, pp, 1, m, stage);
    int64_t backwards = 0, weights = 0, in_flight = 0, peak = 0;
    for (const ScheduleItem& item : order) {
      if (item.pass == PipelinePass::kForward) peak = std::max(peak, ++in_flight);
      if (item.pass == PipelinePass::kBackward) ++backwards;
      if (item.pass == PipelinePass::kWeight) {
        --in_flight;
        CHECK(item.microbatch == weights++);
        if (backwards < m) CHECK(backwards - weights == stage);  // W(k) right after B(k + r)
      }
    }
    CHECK(peak <= pp);  // 1F1B's activation peak (stage 0's)
  }
}

TEST_CASE("1f1b warms up with pp - stage - 1 forwards", "[simulator][pipeline]") {
  const std::vector<ScheduleItem> first = StageOrder(PipelineSchedule::k1F1B, 4, 1, 8, 0);
  for (int i = 0; i < 4; ++i) CHECK(first[i].pass == PipelinePass::kForward);
  CHECK(first[4].pass == PipelinePass::kBackward);
  const std::vector<ScheduleItem> last = StageOrder(PipelineSchedule::k1F1B, 4, 1, 8, 3);
  CHECK(last[0].pass == PipelinePass::kForward);
  CHECK(last[1].pass == PipelinePass::kBackward);
}

TEST_CASE("1f1b's bubble fraction is (p-1)/(m+p-1)", "[simulator][pipeline]") {
  const int64_t pp = GENERATE(2, 4, 8);
  const int64_t m = GENERATE(1, 3, 8, 16);
  INFO("pp=" << pp << " m=" << m);
  const SimResult r = SimulatePipeline(pp, m, PipelineSchedule::k1F1B);
  const double expected = static_cast<double>(pp - 1) / static_cast<double>(m + pp - 1);
  CHECK(BubbleFraction(r) == Approx(expected).epsilon(1e-9));
  // Every stage computes the same and the step is compute plus bubble.
  CHECK(r.time.compute_s + r.time.bubble_s == Approx(r.time.total_s).epsilon(1e-9));
  for (const SimStage& s : r.stages) CHECK(s.time.compute_s == Approx(r.time.compute_s).epsilon(1e-9));
}

TEST_CASE("gpipe takes as long as 1f1b", "[simulator][pipeline]") {
  const int64_t pp = GENERATE(2, 4);
  const int64_t m = GENERATE(1, 4, 9);
  const SimResult gpipe = SimulatePipeline(pp, m, PipelineSchedule::kGpipe);
  const SimResult one = SimulatePipeline(pp, m, PipelineSchedule::k1F1B);
  CHECK(gpipe.time.total_s == Approx(one.time.total_s).epsilon(1e-9));
  CHECK(gpipe.time.bubble_s == Approx(one.time.bubble_s).epsilon(1e-9));
}

TEST_CASE("interleaving v chunks divides the 1f1b bubble by v", "[simulator][pipeline]") {
  const int64_t pp = GENERATE(2, 4);
  const int64_t v = GENERATE(2, 4);
  const int64_t m = GENERATE(1, 2, 4);  // micro-batches = m * pp (interleaved: m % pp == 0)
  INFO("pp=" << pp << " v=" << v << " m=" << m * pp);
  const SimResult one = SimulatePipeline(pp, m * pp, PipelineSchedule::k1F1B);
  const SimResult inter = SimulatePipeline(pp, m * pp, PipelineSchedule::kInterleaved, v);
  CHECK(inter.time.compute_s == Approx(one.time.compute_s).epsilon(1e-9));
  CHECK(inter.time.bubble_s == Approx(one.time.bubble_s / static_cast<double>(v)).epsilon(1e-9));
}

TEST_CASE("zb_h1's bubble is smaller than 1f1b's: (p-1)(f+b-w) against (p-1)(f+b+w)",
          "[simulator][pipeline]") {
  const int64_t pp = GENERATE(2, 4, 8);
  const int64_t m = GENERATE(8, 16);
  INFO("pp=" << pp << " m=" << m);
  const SimResult one = SimulatePipeline(pp, m, PipelineSchedule::k1F1B);
  const SimResult zb = SimulatePipeline(pp, m, PipelineSchedule::kZeroBubbleH1);
  CHECK(zb.time.compute_s == Approx(one.time.compute_s).epsilon(1e-9));
  CHECK(zb.time.bubble_s < one.time.bubble_s);
  CHECK(zb.time.total_s < one.time.total_s);
  // With m >= p the schedule reaches the ZB-H1 bubble of Qi et al. exactly (the cost
  // model's PipelineBubble): f, b, w of one stage per micro-batch.
  const ModelSpec model = test::TinyLlama(16);
  ParallelPlan plan;
  plan.pp = pp;
  const StepWork work = BuildStepWork(model, test::Training(m), plan);
  const ComputeRates rates = RatesFor(test::TestGpu(), Precision::kMixed);
  const double n = static_cast<double>(work.stage_layers.middle);
  const double f = n * TimeOf(work.block.forward, rates).total();
  const double b = n * TimeOf(work.block.backward_input, rates).total();
  const double w = n * TimeOf(work.block.backward_weight, rates).total();
  CHECK(zb.time.bubble_s == Approx(PipelineBubble(PipelineSchedule::kZeroBubbleH1, pp, 1, f, b, w)).epsilon(1e-9));
  CHECK(one.time.bubble_s == Approx(PipelineBubble(PipelineSchedule::k1F1B, pp, 1, f, b, w)).epsilon(1e-9));
}

TEST_CASE("unequal stages: the pipeline fills and drains through the lighter stages, in "
          "both models", "[simulator][pipeline][agreement]") {
  // A 64k vocabulary on 8 layers: the last stage's head is several blocks' work.
  ModelSpec model = test::TinyLlama(8);
  model.vocab_size = 65536;
  const int64_t pp = GENERATE(2, 4);
  const auto schedule = GENERATE(PipelineSchedule::kGpipe, PipelineSchedule::k1F1B);
  const int64_t m = 8;
  INFO("pp=" << pp << " " << ToString(schedule));
  const ClusterSpec cluster = test::FreeNetwork(1, pp);
  ParallelPlan plan;
  plan.pp = pp;
  plan.schedule = schedule;
  const TrainingSpec training = test::Training(m);
  REQUIRE(Validate(plan, model, training, cluster.world_size()).empty());
  const StepWork work = BuildStepWork(model, training, plan);
  const SimResult sim = SimulateWork(work, model, cluster, training.precision, {.timeline = false});
  const StepTimeBreakdown analytic = AnalyticStepTime(work, cluster, training.precision);
  // The slowest stage's own bubble term would be (pp-1) times its micro-batch: more than
  // the step shows.
  const double slowest_mb = analytic.compute_s / static_cast<double>(m);
  CHECK(analytic.bubble_s < 0.9 * static_cast<double>(pp - 1) * slowest_mb);
  CHECK(analytic.total_s == Approx(sim.time.total_s).epsilon(0.01));
}

}  // namespace
}  // namespace meshplan
