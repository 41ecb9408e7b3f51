// Small ImGui helpers shared by the panels: palette colours as ImGui colours,
// a colour swatch, and recording drawn rectangles in framebuffer pixels.
#pragma once

#include <imgui.h>

#include <string>

#include "gui/drawn_layout.h"
#include "gui/palette.h"

namespace meshplan {

inline ImU32 ToImU32(Rgb c, int alpha = 255) { return IM_COL32(c.r, c.g, c.b, alpha); }
inline ImVec4 ToImVec4(Rgb c) { return ImVec4(c.r / 255.0f, c.g / 255.0f, c.b / 255.0f, 1.0f); }

// Screen coordinates -> framebuffer pixels (DrawnLayout's space).
inline DrawnRect ToDrawnRect(ImVec2 min, ImVec2 max) {
  const ImVec2 s = ImGui::GetIO().DisplayFramebufferScale;
  return {min.x * s.x, min.y * s.y, max.x * s.x, max.y * s.y};
}

// A filled square in `color` followed by `label` on the same line.
void ColorSwatch(Rgb color, const char* label);

// Text in a palette colour, wrapped at the window's edge (messages).
void ColoredText(Rgb color, const std::string& text);
// Text in a palette colour on one line (table cells, labels).
void ColoredLabel(Rgb color, const std::string& text);

// A tooltip with `text` when the last item is hovered (also when disabled).
void TooltipOnHover(const std::string& text);

// Before the next item of `width` in a wrapping row: SameLine() unless it would pass `right`
// (a screen x, e.g. the cell's right edge taken at the start of the row).
void SameLineIfFits(float width, float right);

// Records the current window's rectangle as a panel of the DrawnLayout.
void RecordPanel(DrawnLayout& layout, const char* name);

}  // namespace meshplan
