// DrawMeasuredPanel: load a measured.json from `meshplan run` and show each figure
// (peak memory per rank, step time, tokens/s) measured beside predicted, as paired
// bars and as ComparePlan()'s table with the error; the loss curve underneath.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <fmt/format.h>

#include "gui/imgui_util.h"
#include "gui/panels.h"
#include "planner/units_format.h"

namespace meshplan {
namespace {

std::string FormatValue(const std::string& unit, double value) {
  if (unit == "bytes") return FormatGiB(value);
  if (unit == "s") return FormatSeconds(value);
  if (unit == "tokens/s") return FormatTokensPerS(value);
  return fmt::format("{:.4g} {}", value, unit);
}

Rgb StatusColor(FigureStatus status) {
  switch (status) {
    case FigureStatus::kWithin: return kColorFits;
    case FigureStatus::kOutside: return kColorDoesNotFit;
    case FigureStatus::kNoPrediction: return kColorDimText;
  }
  return kColorDimText;
}

// Predicted (top) and measured (bottom) as two thin bars on the same scale.
void DrawPair(const FigureComparison& f, float width) {
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float h = ImGui::GetTextLineHeight() * 0.45f;
  const bool predicted = f.status != FigureStatus::kNoPrediction;
  const double top = std::max(predicted ? f.predicted : 0.0, f.measured);
  if (top > 0) {
    if (predicted)
      draw->AddRectFilled(p, ImVec2(p.x + static_cast<float>(f.predicted / top) * width, p.y + h),
                          ToImU32(kColorPredicted));
    draw->AddRectFilled(ImVec2(p.x, p.y + h + 1),
                        ImVec2(p.x + static_cast<float>(f.measured / top) * width, p.y + 2 * h + 1),
                        ToImU32(kColorMeasured));
  }
  ImGui::Dummy(ImVec2(width, 2 * h + 1));
}

void DrawComparison(const Comparison& c) {
  ImGui::TextDisabled("ran on %s; predicted for %s", c.device.c_str(), c.hardware.c_str());
  ColorSwatch(kColorPredicted, "predicted");
  ImGui::SameLine();
  ColorSwatch(kColorMeasured, "measured");
  const ImGuiTableFlags flags = ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg |
                                ImGuiTableFlags_ScrollY;
  const float rows_h = (c.figures.size() + 1) * (ImGui::GetTextLineHeight() +
                                                 2 * ImGui::GetStyle().CellPadding.y) +
                       ImGui::GetStyle().ItemSpacing.y;
  const float height = std::min(rows_h, ImGui::GetContentRegionAvail().y * 0.65f);
  if (!ImGui::BeginTable("comparison", 6, flags, ImVec2(0, height))) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  for (const char* title : {"figure", "predicted", "measured", "error", "", "status"})
    ImGui::TableSetupColumn(title);
  ImGui::TableHeadersRow();
  for (const FigureComparison& f : c.figures) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(f.figure.c_str());
    ImGui::TableNextColumn();
    const bool predicted = f.status != FigureStatus::kNoPrediction;
    ImGui::TextUnformatted(predicted ? FormatValue(f.unit, f.predicted).c_str() : "-");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(FormatValue(f.unit, f.measured).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(predicted ? fmt::format("{:+.1f}%", f.error_pct).c_str() : "");
    ImGui::TableNextColumn();
    DrawPair(f, ImGui::GetFontSize() * 6);
    ImGui::TableNextColumn();
    ColoredLabel(StatusColor(f.status), ToString(f.status));
    TooltipOnHover(f.note);
  }
  ImGui::EndTable();
}

}  // namespace

void DrawMeasuredPanel(ExplorerState& state) {
  MeasuredPanelState& m = state.measured;
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 16);
  ImGui::InputTextWithHint("##measured", "measured.json from meshplan run", &m.path);
  ImGui::SameLine();
  if (ImGui::Button("load")) LoadMeasuredInto(state, m.path);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 6);
  float tolerance = m.tolerance_pct;
  if (ImGui::SliderFloat("tolerance %", &tolerance, 1.0f, 50.0f, "%.0f"))
    SetMeasuredTolerance(state, tolerance);
  if (!m.measured) {
    ImGui::TextDisabled("Nothing loaded: run `meshplan run plan.yaml --out "
                        "measured.json`, then load it here.");
    return;
  }
  const Measurement& meas = *m.measured;
  ImGui::TextDisabled("%s: %lld steps (%lld warm-up) of %s, %s", m.path.c_str(),
                      static_cast<long long>(meas.steps), static_cast<long long>(meas.warmup_steps),
                      meas.environment.model.c_str(), meas.environment.plan.c_str());
  if (!m.mismatch.empty()) {
    ColoredText(kColorWarningText, m.mismatch);
    if (ImGui::Button("use the measured plan and batch")) UseMeasuredSetup(state);
  }
  if (m.comparison) DrawComparison(*m.comparison);
  if (!meas.losses.empty()) {
    std::vector<float> losses(meas.losses.begin(), meas.losses.end());
    ImGui::SetNextItemWidth(-FLT_MIN);
    ImGui::PlotLines("##loss", losses.data(), static_cast<int>(losses.size()), 0,
                     fmt::format("loss {:.3f} -> {:.3f}", losses.front(), losses.back()).c_str(),
                     FLT_MAX, FLT_MAX,
                     ImVec2(0, std::max(ImGui::GetContentRegionAvail().y, ImGui::GetFrameHeight())));
  }
}

}  // namespace meshplan
