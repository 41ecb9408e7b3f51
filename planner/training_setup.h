// TrainingSetup: what is trained and on what (model, cluster, per-step training spec), and
// PlanFile: a setup with the plan that splits it. The one bundle that commands, plan files
// (`meshplan search --out`, `run`, `compare`), the GUI and reports pass around.
#pragma once

#include "planner/cluster_spec.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/training_spec.h"

namespace meshplan {

struct TrainingSetup {
  ModelSpec model;
  ClusterSpec cluster;
  TrainingSpec training;
  bool operator==(const TrainingSetup&) const = default;
};

// A self-contained plan: what `meshplan search --out` writes and `run` / `compare` read
// (planner/config/config_loader.h loads and saves it).
struct PlanFile : TrainingSetup {
  ParallelPlan plan;
  bool operator==(const PlanFile&) const = default;
};

}  // namespace meshplan
