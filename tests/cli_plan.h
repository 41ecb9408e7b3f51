// A small plan file for tests that hand `meshplan run` / `compare` a plan: one fp32 step of
// 2 sequences of 32 tokens per data-parallel rank, on a cluster of A40s just big enough.
#pragma once

#include <string>

#include "planner/config/config_loader.h"
#include "planner/parallel_plan.h"

namespace meshplan::test {

inline PlanFile OneStepPlan(const std::string& model, const std::string& plan_text) {
  PlanFile pf;
  pf.model = LoadModel(model);
  pf.plan = ParsePlanString(plan_text);
  pf.cluster = LoadCluster(std::to_string(pf.plan.world_size()) + "xa40");
  pf.training.global_batch = pf.plan.dp * 2;
  pf.training.seq_len = 32;
  pf.training.precision = Precision::kFp32;
  pf.training.steps = 1;
  return pf;
}

}  // namespace meshplan::test
