// DrawExplorer: the fixed tiling of the window into panels.
#include <imgui.h>

#include "gui/imgui_util.h"
#include "gui/panels.h"

namespace meshplan {
namespace {

constexpr ImGuiWindowFlags kPanelFlags = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize |
                                         ImGuiWindowFlags_NoCollapse |
                                         ImGuiWindowFlags_NoSavedSettings;

// Column widths and row splits as fractions of the window.
constexpr float kLeftColumn = 0.24f;
constexpr float kMiddleColumn = 0.36f;
constexpr float kSetupHeight = 0.40f;
constexpr float kMemoryHeight = 0.56f;
constexpr float kTimeHeight = 0.32f;

// One panel window at a fixed place; `draw` fills it.
template <typename Draw>
void Panel(ExplorerState& state, const char* title, ImVec2 pos, ImVec2 size, Draw draw) {
  ImGui::SetNextWindowPos(pos, ImGuiCond_Always);
  ImGui::SetNextWindowSize(size, ImGuiCond_Always);
  if (ImGui::Begin(title, nullptr, kPanelFlags)) {
    RecordPanel(state.drawn, title);
    draw(state);
  }
  ImGui::End();
}

void DrawTabs(ExplorerState& state) {
  if (!ImGui::BeginTabBar("tabs")) return;
  struct Tab {
    ExplorerTab tab;
    const char* name;
    void (*draw)(ExplorerState&);
  };
  const Tab tabs[] = {{ExplorerTab::kSearch, "Search", DrawSearchPanel},
                      {ExplorerTab::kTimeline, "Timeline", DrawTimelinePanel},
                      {ExplorerTab::kMeasured, "Measured", DrawMeasuredPanel}};
  // A requested tab is asked for until ImGui reports it open (the first frame of a
  // tab bar may not honour SetSelected yet).
  for (const Tab& t : tabs) {
    const bool requested = state.ui.select_tab && t.tab == state.ui.tab;
    if (ImGui::BeginTabItem(t.name, nullptr, requested ? ImGuiTabItemFlags_SetSelected : 0)) {
      if (!state.ui.select_tab) state.ui.tab = t.tab;
      if (requested) state.ui.select_tab = false;
      RecordPanel(state.drawn, t.name, /*tab=*/true);
      t.draw(state);
      ImGui::EndTabItem();
    }
  }
  ImGui::EndTabBar();
}

}  // namespace

void DrawExplorer(ExplorerState& state) {
  const ImVec2 d = ImGui::GetIO().DisplaySize;
  const float x1 = d.x * kLeftColumn, x2 = x1 + d.x * kMiddleColumn;
  const float left_split = d.y * kSetupHeight, middle_split = d.y * kMemoryHeight,
              right_split = d.y * kTimeHeight;
  Panel(state, "Setup", {0, 0}, {x1, left_split}, DrawSetupPanel);
  Panel(state, "Knobs", {0, left_split}, {x1, d.y - left_split}, DrawKnobsPanel);
  Panel(state, "Memory per GPU", {x1, 0}, {x2 - x1, middle_split}, DrawMemoryPanel);
  Panel(state, "Trade-offs", {x1, middle_split}, {x2 - x1, d.y - middle_split},
        DrawTradeoffsPanel);
  Panel(state, "Step time", {x2, 0}, {d.x - x2, right_split}, DrawTimePanel);
  Panel(state, "Explore", {x2, right_split}, {d.x - x2, d.y - right_split}, DrawTabs);
}

}  // namespace meshplan
