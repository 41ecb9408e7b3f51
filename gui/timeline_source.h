// Where the Timeline panel's data comes from: the event-driven simulator
// (simulator/), converted into a TimelineView.
#pragma once

#include "gui/timeline_view.h"
#include "planner/cluster_spec.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/training_spec.h"

namespace meshplan {

// The simulated step of a valid plan (streams x spans), or an empty view with a note.
TimelineView SimulatedTimeline(const ModelSpec& model, const ClusterSpec& cluster,
                               const TrainingSpec& training, const ParallelPlan& plan);

}  // namespace meshplan
