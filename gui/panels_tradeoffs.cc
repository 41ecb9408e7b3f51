// DrawTradeoffsPanel: the current plan across ZeRO 0-3 and across tp = 1, 2, 4, 8,
// side by side: a stacked memory bar per GPU against the capacity line and the
// predicted tokens/s under each bar where it fits, then the numbers in a table. Clicking a
// column loads that plan into the knobs.
#include <imgui.h>

#include <algorithm>
#include <fmt/format.h>

#include "gui/draw_memory.h"
#include "gui/imgui_util.h"
#include "gui/memory_view.h"
#include "gui/panels.h"
#include "planner/units_format.h"

namespace meshplan {
namespace {

// The colour of a plan's figures that does not fit: amber when only the allocator's assumed
// fragmentation puts it over (FitIsTight), red otherwise.
Rgb NoFitColor(const PlanCost& cost) { return FitIsTight(cost) ? kColorTight : kColorDoesNotFit; }

constexpr ImU32 kPlotBackground = IM_COL32(24, 26, 32, 255);
constexpr ImU32 kCurrentHighlight = IM_COL32(255, 255, 255, 40);

// The value a row's label names on the chart's axis: "2" of "ZeRO-2", "4" of "tp=4".
std::string AxisValue(const std::string& label) {
  return label.substr(label.find_last_of("=-") + 1);
}

// One small chart: a short title (`help` in its tooltip), a bar per row against the
// capacity line, each row's value on the axis under its bar, and its tokens/s under
// that where it fits the bar's slot (the table below always has it).
void DrawRowsChart(ExplorerState& state, const char* id, const char* title, const char* help,
                   const std::vector<TradeoffRow>& rows, ImVec2 size) {
  const double capacity = static_cast<double>(state.inputs.cluster.gpu.memory_bytes);
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos(), end(origin.x + size.x, origin.y + size.y);
  const float line = ImGui::GetTextLineHeight();
  const ImVec2 title_size = ImGui::CalcTextSize(title);
  draw->AddText(origin, ImGui::GetColorU32(ImGuiCol_Text), title);
  RecordText(state.drawn, title, origin,
             ImVec2(origin.x + title_size.x, origin.y + title_size.y), origin, end);
  ImGui::PushID(id);
  ImGui::InvisibleButton("title", ImVec2(size.x, line));
  TooltipOnHover(help);
  const ImVec2 plot0(origin.x, origin.y + line * 1.3f);
  const ImVec2 plot1(end.x, end.y - line * 2.3f);
  std::vector<double> totals;
  for (const TradeoffRow& r : rows)
    if (r.valid) totals.push_back(r.cost.memory.total_bytes);
  const MemoryAxis axis{plot0.y, plot1.y, MemoryAxisMax(totals, capacity)};
  draw->AddRectFilled(plot0, plot1, kPlotBackground);

  const float slot = (plot1.x - plot0.x) / std::max<size_t>(rows.size(), 1);
  for (size_t i = 0; i < rows.size(); ++i) {
    const TradeoffRow& row = rows[i];
    const float sx0 = plot0.x + slot * i, centre = sx0 + slot * 0.5f;
    const float half = std::min(slot * 0.3f, line * 1.6f);
    if (row.is_current)
      draw->AddRectFilled(ImVec2(sx0 + 1, plot0.y), ImVec2(sx0 + slot - 1, plot1.y),
                          kCurrentHighlight);
    if (row.valid)
      DrawMemoryBar(draw, std::round(centre - half), std::round(centre + half), axis,
                    row.cost.memory, capacity, nullptr);
    else
      draw->AddText(ImVec2(centre - ImGui::CalcTextSize("n/a").x * 0.5f, plot1.y - line * 1.2f),
                    ImGui::GetColorU32(ImGuiCol_TextDisabled), "n/a");
    const std::string speed = row.valid ? FormatTokensPerS(row.cost.tokens_per_s) : "-";
    const ImU32 text = row.valid && !row.cost.fits ? ToImU32(NoFitColor(row.cost))
                                                   : ImGui::GetColorU32(ImGuiCol_Text);
    SlotLabel(state.drawn, AxisValue(row.label), sx0, sx0 + slot, plot1.y + 2, end.y,
              ImGui::GetColorU32(ImGuiCol_Text));
    SlotLabel(state.drawn, speed, sx0, sx0 + slot, plot1.y + 2 + line, end.y, text);
    // Hover explains, click loads the plan.
    ImGui::SetCursorScreenPos(ImVec2(sx0, plot0.y));
    ImGui::InvisibleButton(fmt::format("col{}", i).c_str(),
                           ImVec2(std::max(1.0f, slot), plot1.y - plot0.y + line * 2));
    if (ImGui::IsItemHovered()) {
      if (row.valid)
        MemoryTooltip(row.label + ": " + ToShortPlanString(row.plan) + ", " +
                          FormatTokensPerS(row.cost.tokens_per_s) + " tokens/s",
                      row.cost.memory, capacity);
      else
        TooltipOnHover("not valid: " + row.note);
    }
    if (ImGui::IsItemClicked() && row.valid && !row.is_current) SetPlan(state, row.plan);
  }
  ImGui::PopID();
  DrawCapacityLine(draw, plot0.x, plot1.x, axis, capacity, "");
  ImGui::SetCursorScreenPos(origin);
  ImGui::Dummy(size);
}

void DrawRowsTable(const std::vector<TradeoffRow>& zero, const std::vector<TradeoffRow>& tp,
                   const std::vector<TradeoffRow>& ep) {
  const ImGuiTableFlags flags = ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg |
                                ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV;
  if (!ImGui::BeginTable("tradeoff table", 6, flags, ImGui::GetContentRegionAvail())) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  for (const char* title : {"", "mem/GPU", "tokens/s", "MFU", "step", "also changes"})
    ImGui::TableSetupColumn(title);
  ImGui::TableHeadersRow();
  for (const auto* rows : {&zero, &tp, &ep})
    for (const TradeoffRow& r : *rows) {
      ImGui::TableNextRow();
      if (r.is_current)
        ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg1, ImGui::GetColorU32(ImGuiCol_Header));
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(r.label.c_str());
      if (!r.valid) {
        ImGui::TableNextColumn();
        ImGui::TextDisabled("not valid");
        TooltipOnHover(r.note);
        continue;
      }
      ImGui::TableNextColumn();
      if (r.cost.fits)
        ImGui::TextUnformatted(FormatGiB(r.cost.memory.total_bytes).c_str());
      else
        ColoredLabel(NoFitColor(r.cost), FormatGiB(r.cost.memory.total_bytes));
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(FormatTokensPerS(r.cost.tokens_per_s).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(FormatPercent(r.cost.mfu).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(FormatSeconds(r.cost.time.total_s).c_str());
      ImGui::TableNextColumn();
      ImGui::TextDisabled("%s", r.note.c_str());
    }
  ImGui::EndTable();
}

}  // namespace

void DrawTradeoffsPanel(ExplorerState& state) {
  const ExplorerDerived& d = state.derived;
  if (!d.valid || !d.error.empty()) {
    ImGui::TextWrapped("No trade-offs: the plan is not valid (see Knobs).");
    return;
  }
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float gap = ImGui::GetStyle().ItemSpacing.x * 2;
  // A MoE model adds the expert-parallel chart: three charts side by side.
  const float charts = d.ep_rows.empty() ? 2.0f : 3.0f;
  const ImVec2 chart((avail.x - gap * (charts - 1)) / charts, avail.y * 0.55f);
  DrawRowsChart(state, "zero", "ZeRO stage",
                "memory per GPU at ZeRO stage 0-3 and tokens/s under each bar", d.zero_rows,
                chart);
  ImGui::SameLine(0, gap);
  DrawRowsChart(state, "tp", "tensor par.",
                "memory per GPU at tp = 1, 2, 4, 8 (dp rebalanced) and tokens/s under each bar",
                d.tp_rows, chart);
  if (!d.ep_rows.empty()) {
    ImGui::SameLine(0, gap);
    DrawRowsChart(state, "ep", "expert par.",
                  "memory per GPU at ep = 1, 2, 4, 8 (experts split, all-to-all) and tokens/s "
                  "under each bar",
                  d.ep_rows, chart);
  }
  DrawRowsTable(d.zero_rows, d.tp_rows, d.ep_rows);
}

}  // namespace meshplan
