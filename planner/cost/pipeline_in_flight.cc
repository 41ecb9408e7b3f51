#include "planner/cost/pipeline_in_flight.h"

#include <algorithm>
#include <cmath>

namespace meshplan {

MicrobatchesInFlight CountMicrobatchesInFlight(const ParallelPlan& plan, int64_t m, int64_t stage) {
  m = std::max<int64_t>(m, 1);
  if (plan.pp == 1) return {1.0, 1, 1};
  switch (plan.schedule) {
    case PipelineSchedule::kGpipe: return {static_cast<double>(m), m, m};
    case PipelineSchedule::k1F1B:
    case PipelineSchedule::kZeroBubbleH1: {
      const int64_t n = std::min(m, plan.pp - stage);
      return {static_cast<double>(n), n, n};
    }
    case PipelineSchedule::kInterleaved: {
      const int64_t vpp = plan.virtual_stages, total_chunks = m * vpp;
      const int64_t warmup =
          m == plan.pp ? total_chunks : (plan.pp - stage - 1) * 2 + (vpp - 1) * plan.pp;
      const int64_t chunks = std::min(warmup + 1, total_chunks);
      const double blocks = static_cast<double>(chunks) / static_cast<double>(vpp);
      const int64_t last = m == plan.pp ? m : 1;  // all-warm-up holds every micro-batch's loss
      return {blocks, static_cast<int64_t>(std::ceil(blocks)), last};
    }
  }
  return {1.0, 1, 1};
}

}  // namespace meshplan
