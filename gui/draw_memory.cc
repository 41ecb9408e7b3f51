#include "gui/draw_memory.h"

#include <algorithm>
#include <cmath>

#include "gui/imgui_util.h"
#include "gui/memory_view.h"
#include "planner/units_format.h"

namespace meshplan {

void DrawMemoryBar(ImDrawList* draw, float x0, float x1, const MemoryAxis& axis,
                   const MemoryBreakdown& memory, double capacity_bytes, DrawnBar* record) {
  double below = 0;
  for (const MemorySegment& s : MemorySegments(memory)) {
    if (s.bytes <= 0) continue;
    const float y1 = axis.Y(below), y0 = axis.Y(below + s.bytes);
    draw->AddRectFilled(ImVec2(x0, y0), ImVec2(x1, y1), ToImU32(s.color));
    if (record) record->segments.push_back({s.name, s.bytes, ToDrawnRect({x0, y0}, {x1, y1}), s.color});
    below += s.bytes;
  }
  const bool fits = memory.total_bytes <= capacity_bytes;
  const float top = axis.Y(std::max(below, memory.total_bytes));
  if (!fits) {
    const float t = std::max(2.0f, ImGui::GetFontSize() * 0.15f);
    draw->AddRect(ImVec2(x0 - t * 0.5f, top - t * 0.5f), ImVec2(x1 + t * 0.5f, axis.y_bottom),
                  ToImU32(kColorDoesNotFit), 0.0f, 0, t);
  }
  if (record) {
    record->total_bytes = memory.total_bytes;
    record->fits = fits;
    record->rect = ToDrawnRect({x0, top}, {x1, axis.y_bottom});
  }
}

float DrawCapacityLine(ImDrawList* draw, float x0, float x1, const MemoryAxis& axis,
                       double capacity_bytes, const std::string& label) {
  const float thickness = std::max(2.0f, std::round(ImGui::GetFontSize() * 0.15f));
  const float y = axis.Y(capacity_bytes);
  draw->AddLine(ImVec2(x0, y), ImVec2(x1, y), ToImU32(kColorCapacityLine), thickness);
  if (label.empty()) return thickness;
  // The label sits on a dark patch above the line's right end, readable over a bar.
  const ImVec2 size = ImGui::CalcTextSize(label.c_str());
  const ImVec2 at(x1 - size.x - 4, y - size.y - thickness - 1);
  draw->AddRectFilled(ImVec2(at.x - 2, at.y), ImVec2(at.x + size.x + 2, at.y + size.y),
                      IM_COL32(0, 0, 0, 170), 2.0f);
  draw->AddText(at, ToImU32(kColorCapacityLine), label.c_str());
  return thickness;
}

void MemoryTooltip(const std::string& title, const MemoryBreakdown& memory,
                   double capacity_bytes) {
  ImGui::BeginTooltip();
  ImGui::TextUnformatted(title.c_str());
  for (const MemorySegment& s : MemorySegments(memory)) {
    ColorSwatch(s.color, s.name);
    ImGui::SameLine(ImGui::GetFontSize() * 8);
    ImGui::TextUnformatted(FormatGiB(s.bytes).c_str());
  }
  ImGui::Separator();
  ImGui::Text("total %s of %s", FormatGiB(memory.total_bytes).c_str(),
              FormatGiB(capacity_bytes).c_str());
  if (!memory.peak_phase.empty()) ImGui::TextDisabled("peak in: %s", memory.peak_phase.c_str());
  ImGui::EndTooltip();
}

}  // namespace meshplan
