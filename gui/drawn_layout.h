// DrawnLayout: where the last frame drew what, in framebuffer pixels.
//
// The panels record it while they draw (into ExplorerState::drawn); with
// `meshplan gui --screenshot out.png --layout-out layout.json` the app writes it
// beside the PNG so a test knows where to look for the memory bars and the
// capacity line, and which colours to expect there, and where each recorded text
// lies against the region it must stay within (docs/commands.md#gui: the layout
// test). Origin top-left, y down (the PNG's orientation); x1/y1 exclusive.
#pragma once

#include <string>
#include <vector>

#include "gui/palette.h"

namespace meshplan {

struct DrawnRect {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

struct DrawnSegment {
  std::string name;  // "params", "grads", ..., "transient"
  double bytes = 0;
  DrawnRect rect;
  Rgb color;
};

struct DrawnBar {
  std::string label;   // "stage 0", "seed"
  double total_bytes = 0;
  bool fits = true;
  DrawnRect rect;      // the whole bar (all segments)
  std::vector<DrawnSegment> segments;  // bottom to top
};

struct DrawnMemoryChart {
  bool drawn = false;
  DrawnRect plot;              // the chart's plot area
  double axis_max_bytes = 0;   // bytes at plot.y0 (0 bytes at plot.y1)
  double capacity_bytes = 0;
  float capacity_y = 0;        // centre of the capacity line
  float capacity_thickness = 0;
  Rgb capacity_color;
  Rgb does_not_fit_color;      // outline of bars over capacity
  std::vector<DrawnBar> bars;
};

struct DrawnPanel {
  std::string name;  // "Setup", "Knobs", "Memory per GPU", ...
  DrawnRect rect;
  bool tab = false;  // a tab inside the panel recorded before it ("Search" in "Explore")
};

// A text the panels promise to show whole: `rect` must lie within `fit` (its chart
// slot, its table column, the panel's visible content; a scrolling region's extended
// by its scroll range: what is below the fold is reached by scrolling, not cut), and
// no two texts of one panel overlap.
struct DrawnText {
  std::string panel;  // the panel (or tab) drawing it
  std::string text;
  DrawnRect rect;
  DrawnRect fit;
};

struct DrawnLayout {
  int framebuffer_width = 0;
  int framebuffer_height = 0;
  float ui_scale = 1;
  std::vector<DrawnPanel> panels;
  std::vector<DrawnText> texts;
  DrawnMemoryChart memory;
};

// The layout as JSON ({"framebuffer": [w, h], "panels": {name: rect}, "tabs": [name],
// "texts": [{"panel", "text", "rect", "fit"}], "memory": {...}}).
std::string DrawnLayoutToJson(const DrawnLayout& layout);

}  // namespace meshplan
