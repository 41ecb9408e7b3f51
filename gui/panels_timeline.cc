// DrawTimelinePanel: the simulated step as a Gantt chart, one row per stream,
// time to the right; spans coloured by kind, labelled when wide enough.
#include <imgui.h>

#include <algorithm>
#include <fmt/format.h>

#include "gui/imgui_util.h"
#include "gui/panels.h"
#include "planner/units_format.h"

namespace meshplan {
namespace {

constexpr ImU32 kPlotBackground = IM_COL32(24, 26, 32, 255);
constexpr ImU32 kRowSeparator = IM_COL32(55, 58, 66, 255);

Rgb SpanColor(const TimelineSpan& span) {
  switch (span.kind) {
    case SpanKind::kCompute: return kColorCompute;
    case SpanKind::kRecompute: return kColorRecompute;
    case SpanKind::kComm: return kColorCommByDim[static_cast<int>(span.dim)];
    case SpanKind::kBubble: return kColorBubble;
    case SpanKind::kOptimizer: return kColorOptimizerStep;
    case SpanKind::kOther: return kColorDimText;
  }
  return kColorDimText;
}

void DrawLegend() {
  const std::pair<Rgb, const char*> items[] = {
      {kColorCompute, "forward/backward"}, {kColorRecompute, "recompute"},
      {kColorOptimizerStep, "optimizer"},  {kColorCommByDim[0], "dp"},
      {kColorCommByDim[1], "pp"},          {kColorCommByDim[2], "cp"},
      {kColorCommByDim[3], "tp"},          {kColorCommByDim[4], "ep"}};
  bool first = true;
  for (const auto& [color, label] : items) {
    if (!first) ImGui::SameLine();
    first = false;
    ColorSwatch(color, label);
  }
}

}  // namespace

void DrawTimelinePanel(ExplorerState& state) {
  EnsureTimeline(state);
  const TimelineView& view = state.derived.timeline;
  if (!view.note.empty()) ImGui::TextDisabled("%s", view.note.c_str());
  if (view.streams.empty() || view.end_s <= 0) return;
  DrawLegend();

  float name_w = 0;
  for (const TimelineStream& s : view.streams)
    name_w = std::max(name_w, ImGui::CalcTextSize(s.name.c_str()).x);
  name_w += ImGui::GetStyle().ItemSpacing.x;
  const float row_h = ImGui::GetFrameHeight();
  const float width = ImGui::GetContentRegionAvail().x;
  if (!ImGui::BeginChild("gantt", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar)) {
    ImGui::EndChild();
    return;
  }
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float x0 = origin.x + name_w, x1 = origin.x + width - ImGui::GetStyle().ScrollbarSize;
  const float px_per_s = (x1 - x0) / static_cast<float>(view.end_s);
  const float axis_h = ImGui::GetTextLineHeight() * 1.4f;
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text), dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);

  // Time axis: ticks at quarters, each label centred on its tick and kept inside the
  // plot; a label that would touch the previous one is left out.
  float last_right = -1e9f;
  for (int i = 0; i <= 4; ++i) {
    const double t = view.end_s * i / 4;
    const float x = x0 + static_cast<float>(t) * px_per_s;
    const std::string label = FormatSeconds(t);
    const float w = ImGui::CalcTextSize(label.c_str()).x;
    const float left = std::clamp(x - w * 0.5f, x0, x1 - w);
    if (left < last_right + ImGui::GetFontSize()) continue;
    draw->AddLine(ImVec2(x, origin.y + axis_h * 0.8f), ImVec2(x, origin.y + axis_h), dim);
    draw->AddText(ImVec2(left, origin.y), dim, label.c_str());
    last_right = left + w;
  }
  const float top = origin.y + axis_h;
  const float bottom = top + row_h * view.streams.size();
  draw->AddRectFilled(ImVec2(x0, top), ImVec2(x1, bottom), kPlotBackground);

  for (size_t r = 0; r < view.streams.size(); ++r) {
    const TimelineStream& stream = view.streams[r];
    const float y0 = top + row_h * r, y1 = y0 + row_h;
    draw->AddText(ImVec2(origin.x, y0 + (row_h - ImGui::GetTextLineHeight()) * 0.5f), text,
                  stream.name.c_str());
    draw->AddLine(ImVec2(x0, y1), ImVec2(x1, y1), kRowSeparator);
    for (const TimelineSpan& span : stream.spans) {
      const float a = x0 + static_cast<float>(span.start_s) * px_per_s;
      const float b = std::max(a + 1.0f, x0 + static_cast<float>(span.end_s) * px_per_s);
      draw->AddRectFilled(ImVec2(a, y0 + 2), ImVec2(b, y1 - 2), ToImU32(SpanColor(span)));
      const ImVec2 ts = ImGui::CalcTextSize(span.label.c_str());
      if (ts.x + 4 < b - a)
        draw->AddText(ImVec2(a + 2, y0 + (row_h - ts.y) * 0.5f), IM_COL32(0, 0, 0, 255),
                      span.label.c_str());
      if (ImGui::IsMouseHoveringRect(ImVec2(a, y0), ImVec2(b, y1)))
        ImGui::SetTooltip("%s: %s\n%s .. %s (%s)", stream.name.c_str(), span.label.c_str(),
                          FormatSeconds(span.start_s).c_str(), FormatSeconds(span.end_s).c_str(),
                          FormatSeconds(span.end_s - span.start_s).c_str());
    }
  }
  ImGui::Dummy(ImVec2(width - ImGui::GetStyle().ScrollbarSize, bottom - origin.y));
  ImGui::EndChild();
}

}  // namespace meshplan
