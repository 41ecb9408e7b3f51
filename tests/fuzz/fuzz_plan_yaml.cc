// Fuzz target: a plan file (`meshplan search --out`, configs/plans/) through
// PlanFileFromText (model, cluster, training and plan sections, references to configs/ by
// name, Validate()), and a plan file that loads through the analytic estimate.
#include "planner/config/config_loader.h"
#include "planner/cost/cost_model.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return meshplan::fuzz::RunOnText(data, size, [](const std::string& text) {
    const meshplan::PlanFile p = meshplan::PlanFileFromText(text, "fuzz/plan.yaml");
    meshplan::Estimate(p.model, p.cluster, p.training, p.plan);
  });
}
