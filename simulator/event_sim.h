// The event-driven engine: plays a StepGraph out in time.
//
// Rules (the GPU stream model):
//  * each (rank, stream) runs its ops one at a time in issue order; the head op starts
//    when the stream is free and every op it depends on has finished;
//  * a compute op takes its duration_s, (1 + StepGraph::dp_comm_slowdown) times longer for
//    as long as an op of its rank's dp stream runs beside it (NCCL's kernels take SMs from
//    the compute: planner/cost/step_time.h; the rate changes when a dp op starts or ends);
//  * a communication op takes its Transfer's
//    latency_s, then serves its bytes on its rank's link for its tier, whose bandwidth
//    the transfers active there share equally (network.h, processor sharing).
// Events (op finished, latency elapsed) sit in a priority queue by time; ties go to the
// lower op id, so a run is deterministic. Cost: O((ops + rate changes) log ops).
// Throws std::logic_error if ops remain that can never start (a cycle: a bug in the graph).
#pragma once

#include <cstdint>
#include <vector>

#include "simulator/step_graph.h"

namespace meshplan {

struct EventTrace {
  std::vector<double> start_s;  // per op
  std::vector<double> end_s;    // per op
  // The op whose end let this op start: the dependency that finished last, or the
  // stream's previous op when that ended later; -1 for ops that started at time 0.
  std::vector<int32_t> enabler;
  int64_t events = 0;           // events processed
};

EventTrace RunEvents(const StepGraph& graph);

}  // namespace meshplan
