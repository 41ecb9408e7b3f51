// Drawing memory bars (ImGui draw lists), shared by the Memory and Trade-offs panels.
#pragma once

#include <imgui.h>

#include <string>

#include "gui/drawn_layout.h"
#include "planner/plan_cost.h"

namespace meshplan {

// Where a memory chart maps bytes to pixels: 0 bytes at y_bottom, axis_max_bytes at y_top.
struct MemoryAxis {
  float y_top = 0;
  float y_bottom = 0;
  double axis_max_bytes = 1;
  float Y(double bytes) const {
    return y_bottom - static_cast<float>(bytes / axis_max_bytes) * (y_bottom - y_top);
  }
};

// A stacked bar [x0, x1) of `memory`'s segments (gui/memory_view.h), outlined in
// kColorDoesNotFit when its total passes capacity_bytes. Fills *record when given.
void DrawMemoryBar(ImDrawList* draw, float x0, float x1, const MemoryAxis& axis,
                   const MemoryBreakdown& memory, double capacity_bytes, DrawnBar* record);

// The capacity line across [x0, x1) at capacity_bytes, with its label at the right end.
// Returns the line's thickness in pixels.
float DrawCapacityLine(ImDrawList* draw, float x0, float x1, const MemoryAxis& axis,
                       double capacity_bytes, const std::string& label);

// A tooltip listing `memory`'s segments in GB (call when the bar is hovered).
void MemoryTooltip(const std::string& title, const MemoryBreakdown& memory,
                   double capacity_bytes);

}  // namespace meshplan
