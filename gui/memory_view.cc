#include "gui/memory_view.h"

#include <algorithm>

namespace meshplan {

std::vector<MemorySegment> MemorySegments(const MemoryBreakdown& m) {
  return {{"params", m.params_bytes, kColorParams},
          {"grads", m.grads_bytes, kColorGrads},
          {"optimizer", m.optimizer_bytes, kColorOptimizer},
          {"activations", m.activations_bytes, kColorActivations},
          {"logits", m.logits_bytes, kColorLogits},
          {"buffers", m.comm_buffer_bytes + m.gathered_params_bytes, kColorBuffers},
          {"transient", m.transient_bytes, kColorTransient},
          {"runtime", m.runtime_bytes(), kColorRuntime}};
}

double MemoryAxisMax(const std::vector<double>& bar_totals, double capacity_bytes) {
  double top = capacity_bytes;
  for (double t : bar_totals) top = std::max(top, t);
  return top > 0 ? top * 1.1 : 1.0;
}

}  // namespace meshplan
