// Fuzz target: a plan string (--plan, --explain-plan, the plan section of plan files) and
// --only pins: ParsePlanString, then Validate() for a 7B model on 8 GPUs, and for a plan
// that passes, the analytic estimate and one simulated step (what `meshplan estimate` and
// `meshplan simulate` do with it).
#include "planner/cost/cost_model.h"
#include "planner/parallel_plan.h"
#include "planner/search/plan_space.h"
#include "simulator/simulate.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_setups.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const meshplan::ModelSpec model = meshplan::fuzz::Llama7b();
  static const meshplan::ClusterSpec cluster = meshplan::fuzz::H100Node();
  return meshplan::fuzz::RunOnText(data, size, [](const std::string& text) {
    using namespace meshplan;
    TrainingSpec training;
    training.global_batch = 64;
    training.seq_len = 2048;
    try {
      ParsePlanPins(text, "--only");
    } catch (const InputError&) {
    }
    const ParallelPlan plan = ParsePlanString(text, "--plan");
    if (!Validate(plan, model, training, cluster.world_size()).empty()) return;
    Estimate(model, cluster, training, plan);
    Simulate(model, cluster, training, plan, {.timeline = false});
  });
}
