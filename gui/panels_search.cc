// DrawSearchPanel: run the plan search from the window (on a worker thread), a
// sortable table of the best plans, a scatter of memory per GPU vs tokens/s with
// the Pareto frontier; clicking a row or a point loads that plan into the knobs;
// the current plan can be saved as a plan file.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <optional>
#include <fmt/format.h>

#include "gui/imgui_util.h"
#include "gui/panels.h"
#include "planner/units_format.h"

namespace meshplan {
namespace {

constexpr ImU32 kPlotBackground = IM_COL32(24, 26, 32, 255);
// The table's width (in font sizes) below which it starts with fewer columns.
constexpr float kWideTableEm = 48.0f;
// Lines a plan cell wraps into at most, so that a long plan leaves room for the next rows.
constexpr int kPlanCellLines = 4;

void DrawControls(ExplorerState& state) {
  SearchPanelState& s = state.search;
  ImGui::BeginDisabled(s.running);
  if (ImGui::Button(s.running ? "searching..." : "run search")) StartSearch(state);
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 4);
  ImGui::InputInt("keep", &s.top_k, 0);
  s.top_k = std::clamp(s.top_k, 1, 100000);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5);
  ImGui::SliderFloat("headroom", &s.memory_headroom, 0.0f, 0.3f, "%.2f");
  ImGui::SameLine();
  ImGui::Checkbox("tp across nodes", &s.allow_tp_across_nodes);
  if (s.running && s.progress) {
    const int64_t total = s.progress->total, done = s.progress->done;
    ImGui::ProgressBar(total > 0 ? static_cast<float>(done) / total : 0.0f, ImVec2(-1, 0),
                       fmt::format("{} / {} meshes", done, total).c_str());
  }
  if (const auto& r = s.result) {
    ImGui::TextDisabled("%s candidates, %s valid, %s fit; %.2f s on %d threads",
                        FormatCount(static_cast<double>(r->candidates)).c_str(),
                        FormatCount(static_cast<double>(r->valid)).c_str(),
                        FormatCount(static_cast<double>(r->fitting)).c_str(), r->wall_s, r->threads);
    if (SearchResultIsStale(state))
      ColoredText(kColorWarningText, "the setup changed since this search: run it again");
  }
}

void DrawTable(ExplorerState& state, float height) {
  SearchPanelState& s = state.search;
  const std::vector<RankedPlan>& rows = s.result->top;
  const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_RowBg |
                                ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV |
                                ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_Resizable |
                                ImGuiTableFlags_Hideable;
  // Right-click a header to show a hidden column.
  const bool narrow = ImGui::GetContentRegionAvail().x < ImGui::GetFontSize() * kWideTableEm;
  if (!ImGui::BeginTable("search results", kNumSearchColumns, flags, ImVec2(0, height))) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  for (int c = 0; c < kNumSearchColumns; ++c) {
    const auto column = static_cast<SearchColumn>(c);
    ImGuiTableColumnFlags cf = column == SearchColumn::kPlan ? ImGuiTableColumnFlags_WidthStretch
                                                             : ImGuiTableColumnFlags_WidthFixed;
    // Narrow: the per-GPU figures (the Step time panel has the knobs' plan's) and the time
    // parts start hidden, so the plan column keeps room to wrap in.
    if (narrow && (column == SearchColumn::kExposedComm || column == SearchColumn::kBubble ||
                   column == SearchColumn::kTokensPerSPerGpu || column == SearchColumn::kTflopsPerGpu))
      cf |= ImGuiTableColumnFlags_DefaultHide;
    if (column == s.sort_column)
      cf |= ImGuiTableColumnFlags_DefaultSort |
            (s.sort_ascending ? ImGuiTableColumnFlags_PreferSortAscending
                              : ImGuiTableColumnFlags_PreferSortDescending);
    ImGui::TableSetupColumn(ColumnTitle(column), cf, 0.0f, static_cast<ImGuiID>(c));
  }
  ImGui::TableHeadersRow();
  if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs())
    if (specs->SpecsDirty && specs->SpecsCount > 0) {
      SortSearchResults(state, static_cast<SearchColumn>(specs->Specs[0].ColumnUserID),
                        specs->Specs[0].SortDirection == ImGuiSortDirection_Ascending);
      specs->SpecsDirty = false;
    }
  ImGuiListClipper clipper;
  clipper.Begin(static_cast<int>(s.order.size()));
  while (clipper.Step())
    for (int k = clipper.DisplayStart; k < clipper.DisplayEnd; ++k) {
      const size_t i = s.order[k];
      const RankedPlan& r = rows[i];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      const bool selected = r.plan == state.inputs.plan;
      if (ImGui::Selectable(fmt::format("{}##row{}", i + 1, i).c_str(), selected,
                            ImGuiSelectableFlags_SpanAllColumns) &&
          !selected)
        SetPlan(state, r.plan);
      TooltipOnHover(ToPlanString(r.plan));
      for (int c = 1; c < kNumSearchColumns; ++c) {
        ImGui::TableNextColumn();
        const std::string cell = CellText(r, i, static_cast<SearchColumn>(c));
        if (static_cast<SearchColumn>(c) != SearchColumn::kPlan) {
          ImGui::TextUnformatted(cell.c_str());
          continue;
        }
        // The plan wraps at its column's edge, in a few lines at most: a row's tooltip has all.
        const std::string shown =
            WithinLines(cell, ',', ImGui::GetContentRegionAvail().x, kPlanCellLines);
        ImGui::TextWrapped("%s", shown.c_str());
        RecordItemText(state.drawn, shown);
      }
    }
  ImGui::EndTable();
}

// Memory per GPU (x) vs tokens/s (y): the kept plans, the Pareto frontier as a line,
// the current plan ringed. Clicking near a point loads its plan.
void DrawScatter(ExplorerState& state, ImVec2 size) {
  const SearchResult& r = *state.search.result;
  std::vector<const RankedPlan*> points;
  for (const RankedPlan& p : r.top) points.push_back(&p);
  for (const RankedPlan& p : r.pareto) points.push_back(&p);
  if (points.empty() || size.y < ImGui::GetTextLineHeight() * 4) return;
  // The plan in the knobs is ringed, found by the search or not.
  std::optional<RankedPlan> current;
  if (state.derived.valid && state.derived.error.empty())
    current = RankedPlan{state.inputs.plan, state.derived.cost, -1};
  double x_max = 0, y_min = points.front()->cost.tokens_per_s, y_max = 0;
  std::vector<const RankedPlan*> ranged = points;
  if (current) ranged.push_back(&*current);
  for (const RankedPlan* p : ranged) {
    x_max = std::max(x_max, p->cost.memory.total_bytes);
    y_min = std::min(y_min, p->cost.tokens_per_s);
    y_max = std::max(y_max, p->cost.tokens_per_s);
  }
  x_max = std::max(x_max, static_cast<double>(state.inputs.cluster.gpu.memory_bytes)) * 1.05;
  const double y_pad = std::max((y_max - y_min) * 0.08, y_max * 0.01 + 1.0);
  y_min = std::max(0.0, y_min - y_pad);
  y_max += y_pad;

  ImDrawList* draw = ImGui::GetWindowDrawList();
  const float line = ImGui::GetTextLineHeight();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 p0(origin.x + ImGui::CalcTextSize("000.0k").x + 4, origin.y);
  const ImVec2 p1(origin.x + size.x, origin.y + size.y - line * 1.3f);
  auto to_screen = [&](const RankedPlan& p) {
    return ImVec2(p0.x + static_cast<float>(p.cost.memory.total_bytes / x_max) * (p1.x - p0.x),
                  p1.y - static_cast<float>((p.cost.tokens_per_s - y_min) / (y_max - y_min)) *
                             (p1.y - p0.y));
  };
  draw->AddRectFilled(p0, p1, kPlotBackground);
  const float cap_x =
      p0.x + static_cast<float>(state.inputs.cluster.gpu.memory_bytes / x_max) * (p1.x - p0.x);
  draw->AddLine(ImVec2(cap_x, p0.y), ImVec2(cap_x, p1.y), ToImU32(kColorCapacityLine, 120));
  const float radius = std::max(2.0f, line * 0.18f);
  for (const RankedPlan& p : r.top) draw->AddCircleFilled(to_screen(p), radius, ToImU32(kColorScatterPoint));
  for (size_t i = 0; i + 1 < r.pareto.size(); ++i)
    draw->AddLine(to_screen(r.pareto[i]), to_screen(r.pareto[i + 1]),
                  ToImU32(kColorScatterFrontier), 2.0f);
  for (const RankedPlan& p : r.pareto)
    draw->AddCircleFilled(to_screen(p), radius * 1.4f, ToImU32(kColorScatterFrontier));
  if (current)
    draw->AddCircle(to_screen(*current), radius * 2.5f, ToImU32(kColorScatterSelected), 0, 2.0f);
  // Axes' labels.
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  draw->AddText(ImVec2(origin.x, p0.y), dim, FormatTokensPerS(y_max).c_str());
  draw->AddText(ImVec2(origin.x, p1.y - line), dim, FormatTokensPerS(y_min).c_str());
  draw->AddText(ImVec2(p0.x, p1.y + 2), dim, "0 GiB");
  const std::string x_label = "memory per GPU (" + FormatGiB(x_max) + " at right)";
  draw->AddText(ImVec2(p1.x - ImGui::CalcTextSize(x_label.c_str()).x, p1.y + 2), dim,
                x_label.c_str());
  draw->AddText(ImVec2(p0.x + 4, p0.y + 2), dim,
                "tokens/s; line: Pareto frontier; ring: the plan in the knobs");

  ImGui::InvisibleButton("scatter", ImVec2(size.x, p1.y - origin.y));
  if (ImGui::IsItemHovered()) {
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    const RankedPlan* nearest = nullptr;
    float best = radius * radius * 9;
    for (const RankedPlan* p : points) {
      const ImVec2 q = to_screen(*p);
      const float dd = (q.x - mouse.x) * (q.x - mouse.x) + (q.y - mouse.y) * (q.y - mouse.y);
      if (dd < best) best = dd, nearest = p;
    }
    if (nearest) {
      TooltipOnHover(fmt::format("{}\n{} per GPU, {} tokens/s", ToShortPlanString(nearest->plan),
                                 FormatGiB(nearest->cost.memory.total_bytes),
                                 FormatTokensPerS(nearest->cost.tokens_per_s)));
      if (ImGui::IsItemClicked()) SetPlan(state, nearest->plan);
    }
  }
  ImGui::SetCursorScreenPos(ImVec2(origin.x, origin.y + size.y));
}

// "Export...": the current plan for a framework (meshplan export, docs/export.md).
void DrawExportPopup(ExplorerState& state) {
  if (!ImGui::BeginPopup("export plan")) return;
  SearchPanelState& s = state.search;
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 10);
  if (ImGui::BeginCombo("target", ToString(s.export_target))) {
    for (ExportTarget t : {ExportTarget::kMegatron, ExportTarget::kMegatronBridge,
                           ExportTarget::kTorchtitan, ExportTarget::kDeepspeed,
                           ExportTarget::kTorchrun})
      if (ImGui::Selectable(ToString(t), t == s.export_target)) s.export_target = t;
    ImGui::EndCombo();
  }
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 14);
  ImGui::InputText("file", &s.export_path);
  if (ImGui::Button("export")) {
    ExportCurrentPlan(state, s.export_target, s.export_path);
    ImGui::CloseCurrentPopup();
  }
  ImGui::EndPopup();
}

void DrawSave(ExplorerState& state) {
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 14);
  ImGui::InputText("##save path", &state.search.save_path);
  ImGui::SameLine();
  ImGui::BeginDisabled(!state.derived.valid);
  if (ImGui::Button("save current plan")) SaveCurrentPlan(state, state.search.save_path);
  ImGui::SameLine();
  if (ImGui::Button("Export...")) ImGui::OpenPopup("export plan");
  ImGui::EndDisabled();
  DrawExportPopup(state);
}

}  // namespace

void DrawSearchPanel(ExplorerState& state) {
  DrawControls(state);
  DrawSave(state);
  if (!state.search.result) {
    ImGui::TextDisabled("No search yet: press \"run search\".");
    return;
  }
  if (state.search.result->top.empty()) {
    ColoredText(kColorWarningText, state.search.result->valid == 0
                                       ? "no valid plan for this setup"
                                       : "no valid plan fits in memory");
    return;
  }
  const float avail = ImGui::GetContentRegionAvail().y;
  DrawTable(state, avail * 0.48f);
  DrawScatter(state, ImVec2(ImGui::GetContentRegionAvail().x, ImGui::GetContentRegionAvail().y));
}

}  // namespace meshplan
