// The explorer's window: GLFW + OpenGL3 + Dear ImGui set up, the frame loop, and
// cleanup in reverse order. The UI scales to the monitor's DPI (content scale).
//
// RunExplorer() owns nothing but the window: every piece of state lives in the
// ExplorerState it is given, which outlives the call. Single-threaded (the GL
// context belongs to the calling thread).
#pragma once

#include <string>

#include "gui/explorer_state.h"

namespace meshplan {

struct AppOptions {
  int width = 1600;   // window size in screen coordinates
  int height = 1000;
  float ui_scale = 0; // 0: the monitor's content scale (1 on a 96-dpi screen)
  // Non-empty: render `frames` frames in a hidden window, write the last one as a
  // PNG here, and return (for CI under Xvfb and for the README image).
  std::string screenshot_path;
  int frames = 3;
  // With screenshot_path: also write the DrawnLayout of the last frame as JSON here.
  std::string layout_path;
};

// Returns 0, or 1 after printing why (no display, no OpenGL 3.3, PNG not written).
int RunExplorer(ExplorerState& state, const AppOptions& options);

}  // namespace meshplan
