// DrawMemoryPanel: a stacked bar per pipeline stage (every GPU of a stage holds the
// same) of params / grads / optimizer / activations / logits / buffers / transient,
// the seed model's bar beside them, and the GPU's capacity line; a bar over
// capacity is outlined red. Records the geometry in state.drawn.memory.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "gui/draw_memory.h"
#include "gui/imgui_util.h"
#include "gui/memory_view.h"
#include "gui/panels.h"
#include "planner/units_format.h"

namespace meshplan {
namespace {

constexpr ImU32 kPlotBackground = IM_COL32(24, 26, 32, 255);
constexpr ImU32 kGridLine = IM_COL32(70, 74, 84, 255);
constexpr float kMinChartWidthFraction = 0.40f;  // of the panel; the legend table takes the rest

// A round step for about `lines` grid lines up to `max_gib`.
double GridStepGiB(double max_gib, int lines) {
  const double raw = max_gib / lines;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * magnitude) return m * magnitude;
  return 10 * magnitude;
}

void DrawHeader(const ExplorerState& state) {
  const PlanCost& cost = state.derived.cost;
  const double capacity = static_cast<double>(state.inputs.cluster.gpu.memory_bytes);
  ImGui::TextWrapped("peak %s of %s on the worst GPU (stage %lld, %s)",
              FormatGiB(cost.memory.total_bytes).c_str(), FormatGiB(capacity).c_str(),
              static_cast<long long>(cost.memory.worst_stage), cost.memory.peak_phase.c_str());
  if (cost.fits)
    ColoredText(kColorFits, "fits");
  else if (FitIsTight(cost))
    ColoredText(kColorTight, "tight: " + cost.reason);
  else
    ColoredText(kColorDoesNotFit, "does not fit: " + cost.reason);
}

// The bar chart in a box of `size` at the cursor.
void DrawChart(ExplorerState& state, ImVec2 size) {
  const ExplorerDerived& d = state.derived;
  const double capacity = static_cast<double>(state.inputs.cluster.gpu.memory_bytes);
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float line = ImGui::GetTextLineHeight();
  const float axis_w = ImGui::CalcTextSize("000 GiB").x + line * 0.4f;
  const ImVec2 plot0(origin.x + axis_w, origin.y + line * 0.5f);
  const ImVec2 plot1(origin.x + size.x, origin.y + size.y - line * 2.4f);

  std::vector<double> totals{d.seed_memory.total_bytes};
  for (const MemoryBreakdown& m : d.stage_memory) totals.push_back(m.total_bytes);
  MemoryAxis axis{plot0.y, plot1.y, MemoryAxisMax(totals, capacity)};

  draw->AddRectFilled(plot0, plot1, kPlotBackground);
  const double max_gib = ToGiB(axis.axis_max_bytes), step = GridStepGiB(max_gib, 5);
  for (double gib = 0; gib <= max_gib; gib += step) {
    const float y = axis.Y(gib * kBytesPerGiB);
    draw->AddLine(ImVec2(plot0.x, y), ImVec2(plot1.x, y), kGridLine);
    const std::string label = FormatGiB(gib * kBytesPerGiB, 0);
    draw->AddText(ImVec2(plot0.x - ImGui::CalcTextSize(label.c_str()).x - line * 0.2f,
                         y - line * 0.5f),
                  ImGui::GetColorU32(ImGuiCol_TextDisabled), label.c_str());
  }

  // Bars: the stages, a gap, the seed model.
  const int stages = static_cast<int>(d.stage_memory.size());
  const float slot = (plot1.x - plot0.x) / (stages + 1.5f);
  const float bar_w = std::min(slot * 0.62f, line * 5.0f);
  DrawnMemoryChart& rec = state.drawn.memory;
  rec = DrawnMemoryChart{};
  rec.drawn = true;
  rec.plot = ToDrawnRect(plot0, plot1);
  rec.axis_max_bytes = axis.axis_max_bytes;
  rec.capacity_bytes = capacity;
  rec.capacity_color = kColorCapacityLine;
  rec.does_not_fit_color = kColorDoesNotFit;
  for (int i = 0; i <= stages; ++i) {
    const bool seed = i == stages;
    const MemoryBreakdown& m = seed ? d.seed_memory : d.stage_memory[i];
    const float centre = plot0.x + slot * (i + 0.5f + (seed ? 0.5f : 0.0f));
    const float x0 = std::round(centre - bar_w * 0.5f), x1 = std::round(centre + bar_w * 0.5f);
    const std::string label = seed ? "seed" : stages == 1 ? "detailed" : fmt::format("stage {}", i);
    DrawnBar bar;
    bar.label = label;
    DrawMemoryBar(draw, x0, x1, axis, m, capacity, &bar);
    rec.bars.push_back(std::move(bar));
    // Labels under the bar, where they fit its slot: its name and total (the legend and
    // the tooltip have them too).
    const ImU32 text = m.total_bytes > capacity ? ToImU32(kColorDoesNotFit)
                                                : ImGui::GetColorU32(ImGuiCol_Text);
    // A label's room: its bar's centre +- half the way to the nearest neighbour's.
    const float room = seed || stages == 1 ? slot * 1.5f : slot;
    const float sx0 = centre - room * 0.5f, sx1 = centre + room * 0.5f;
    SlotLabel(state.drawn, label, sx0, sx1, plot1.y + 2, origin.y + size.y,
              ImGui::GetColorU32(ImGuiCol_Text));
    SlotLabel(state.drawn, FormatGiB(m.total_bytes), sx0, sx1, plot1.y + 2 + line,
              origin.y + size.y, text);
    // Hover: the breakdown.
    ImGui::SetCursorScreenPos(ImVec2(x0, plot0.y));
    ImGui::InvisibleButton(fmt::format("bar{}", i).c_str(),
                           ImVec2(std::max(1.0f, x1 - x0), plot1.y - plot0.y));
    if (ImGui::IsItemHovered())
      MemoryTooltip(seed ? "seed model (docs/cost_model.md 2(a)-(b))" : label + " (detailed model)",
                    m, capacity);
  }
  const std::string cap_label = "capacity " + FormatGiB(capacity);
  rec.capacity_thickness = DrawCapacityLine(draw, plot0.x, plot1.x, axis, capacity, cap_label);
  rec.capacity_y = axis.Y(capacity) * ImGui::GetIO().DisplayFramebufferScale.y;
  ImGui::SetCursorScreenPos(origin);
  ImGui::Dummy(size);
}

// Segment | detailed (worst stage) | seed, in GB.
void DrawLegend(ExplorerState& state) {
  const ExplorerDerived& d = state.derived;
  const std::vector<MemorySegment> detailed = MemorySegments(d.cost.memory);
  const std::vector<MemorySegment> seed = MemorySegments(d.seed_memory);
  if (!ImGui::BeginTable("memory legend", 3, ImGuiTableFlags_SizingFixedFit |
                                                 ImGuiTableFlags_RowBg))
    return;
  ImGui::TableSetupColumn("part");
  ImGui::TableSetupColumn("detailed");
  ImGui::TableSetupColumn("seed");
  ImGui::TableHeadersRow();
  for (size_t i = 0; i < detailed.size(); ++i) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ColorSwatch(detailed[i].color, detailed[i].name);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(FormatGiB(detailed[i].bytes).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(FormatGiB(seed[i].bytes).c_str());
  }
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::TextUnformatted("total");
  // The totals, the widest numbers, are recorded: the columns must hold them.
  for (const double bytes : {d.cost.memory.total_bytes, d.seed_memory.total_bytes}) {
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(FormatGiB(bytes).c_str());
    RecordItemText(state.drawn, FormatGiB(bytes));
  }
  ImGui::EndTable();
  ImGui::TextDisabled("detailed: worst stage %lld", static_cast<long long>(d.cost.memory.worst_stage));
  ImGui::TextDisabled("seed: the documents' formulas");
}

}  // namespace

void DrawMemoryPanel(ExplorerState& state) {
  if (!state.derived.valid || !state.derived.error.empty()) {
    ImGui::TextWrapped("No estimate: the plan is not valid (see Knobs).");
    return;
  }
  DrawHeader(state);
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  // The legend table's natural width: swatch + the longest name, two numbers, padding.
  const ImGuiStyle& style = ImGui::GetStyle();
  const float legend_w = ImGui::GetTextLineHeight() + ImGui::CalcTextSize("activations").x +
                         2 * ImGui::CalcTextSize("0000.0 GiB").x + 6 * style.CellPadding.x +
                         3 * style.ItemSpacing.x;
  const float chart_w = std::max(avail.x * kMinChartWidthFraction,
                                 avail.x - legend_w - style.ItemSpacing.x);
  ImGui::BeginGroup();
  DrawChart(state, ImVec2(chart_w, avail.y));
  ImGui::EndGroup();
  ImGui::SameLine();
  ImGui::BeginGroup();
  DrawLegend(state);
  ImGui::EndGroup();
}

}  // namespace meshplan
