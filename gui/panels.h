// The explorer's panels: one Draw...Panel(ExplorerState&) per panel, each drawing
// into the current ImGui window, and DrawExplorer(), which tiles the window with
// them. Panels read ExplorerState and change it only through the functions of
// gui/explorer_state.h; they keep no state of their own (no static locals).
#pragma once

#include "gui/explorer_state.h"

namespace meshplan {

// The whole frame: Setup and Knobs on the left, Memory and Trade-offs in the
// middle, Time and a tab bar (Search | Timeline | Measured) on the right.
void DrawExplorer(ExplorerState& state);

void DrawSetupPanel(ExplorerState& state);      // gui/panels_setup.cc
void DrawKnobsPanel(ExplorerState& state);      // gui/panels_knobs.cc
void DrawMemoryPanel(ExplorerState& state);     // gui/panels_memory.cc
void DrawTradeoffsPanel(ExplorerState& state);  // gui/panels_tradeoffs.cc
void DrawTimePanel(ExplorerState& state);       // gui/panels_time.cc
void DrawSearchPanel(ExplorerState& state);     // gui/panels_search.cc
void DrawTimelinePanel(ExplorerState& state);   // gui/panels_timeline.cc
void DrawMeasuredPanel(ExplorerState& state);   // gui/panels_measured.cc

}  // namespace meshplan
