// What a memory bar is made of: the MemoryBreakdown's fields as stacked segments,
// bottom to top, each with its colour (gui/palette.h). Pure; no ImGui.
//
// The breakdown's fields sum to total_bytes (planner/cost/memory_model.h), so the
// segments do too: params, grads, optimizer, activations, logits, buffers
// (communication buckets + gathered ZeRO-3 parameters), transient, runtime (the GPU's
// CUDA context, NCCL buffers, workspaces and allocator overhead; 0 on the CPU profile).
#pragma once

#include <vector>

#include "gui/palette.h"
#include "planner/plan_cost.h"

namespace meshplan {

struct MemorySegment {
  const char* name;  // "params", "grads", "optimizer", "activations", "logits", "buffers",
                     // "transient", "runtime"
  double bytes;
  Rgb color;
};
inline constexpr int kNumMemorySegments = 8;

// All eight segments, zero-sized ones included, in stacking order.
std::vector<MemorySegment> MemorySegments(const MemoryBreakdown& memory);

// The top of a memory chart's axis: the largest bar or the capacity, plus 10% air.
double MemoryAxisMax(const std::vector<double>& bar_totals, double capacity_bytes);

}  // namespace meshplan
