// Small ImGui helpers shared by the panels: palette colours as ImGui colours,
// a colour swatch, and recording drawn rectangles and texts in framebuffer pixels.
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

// `items` (separated by `separator`), cut after the last whole item that leaves room, with
// an ellipsis, so that it wraps at `width` into at most `lines` lines; whole when it fits.
std::string WithinLines(const std::string& items, char separator, float width, int lines);

// A tooltip with `text` when the last item is hovered (also when disabled).
void TooltipOnHover(const std::string& text);

// Before the next item of `width` in a wrapping row: SameLine() unless it would pass `right`
// (a screen x, e.g. the cell's right edge taken at the start of the row).
void SameLineIfFits(float width, float right);

// `text` centred in the slot [x0, x1) at height y, drawn (and recorded, with the slot
// from y down to `bottom` as its fit) only where it fits the slot's width.
void SlotLabel(DrawnLayout& layout, const std::string& text, float x0, float x1, float y,
               float bottom, ImU32 color);

// Records the current window's rectangle as a panel of the DrawnLayout (`tab`: a tab
// inside the panel recorded before it, same rectangle).
void RecordPanel(DrawnLayout& layout, const char* name, bool tab = false);

// Records `text`, drawn at [min, max) (screen coordinates), which must lie within
// [fit_min, fit_max), as a text of the panel recorded last.
void RecordText(DrawnLayout& layout, const std::string& text, ImVec2 min, ImVec2 max,
                ImVec2 fit_min, ImVec2 fit_max);
// Records the last item as `text`; its fit is where the item can be seen: the current
// clip rectangle (the window's content, or the table cell's column), extended by the
// scroll range of the region it is in.
void RecordItemText(DrawnLayout& layout, const std::string& text);

}  // namespace meshplan
