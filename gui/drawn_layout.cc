#include "gui/drawn_layout.h"

#include <nlohmann/json.hpp>

namespace meshplan {
namespace {

nlohmann::json Rect(const DrawnRect& r) { return {r.x0, r.y0, r.x1, r.y1}; }
nlohmann::json Color(const Rgb& c) { return {c.r, c.g, c.b}; }

}  // namespace

std::string DrawnLayoutToJson(const DrawnLayout& layout) {
  nlohmann::json j;
  j["framebuffer"] = {layout.framebuffer_width, layout.framebuffer_height};
  j["ui_scale"] = layout.ui_scale;
  j["panels"] = nlohmann::json::object();
  j["tabs"] = nlohmann::json::array();
  for (const DrawnPanel& p : layout.panels) {
    j["panels"][p.name] = Rect(p.rect);
    if (p.tab) j["tabs"].push_back(p.name);
  }
  j["texts"] = nlohmann::json::array();
  for (const DrawnText& t : layout.texts)
    j["texts"].push_back(
        {{"panel", t.panel}, {"text", t.text}, {"rect", Rect(t.rect)}, {"fit", Rect(t.fit)}});
  const DrawnMemoryChart& m = layout.memory;
  nlohmann::json mem;
  mem["drawn"] = m.drawn;
  mem["plot"] = Rect(m.plot);
  mem["axis_max_bytes"] = m.axis_max_bytes;
  mem["capacity_bytes"] = m.capacity_bytes;
  mem["capacity_y"] = m.capacity_y;
  mem["capacity_thickness"] = m.capacity_thickness;
  mem["capacity_color"] = Color(m.capacity_color);
  mem["does_not_fit_color"] = Color(m.does_not_fit_color);
  mem["bars"] = nlohmann::json::array();
  for (const DrawnBar& bar : m.bars) {
    nlohmann::json b;
    b["label"] = bar.label;
    b["total_bytes"] = bar.total_bytes;
    b["fits"] = bar.fits;
    b["rect"] = Rect(bar.rect);
    b["segments"] = nlohmann::json::array();
    for (const DrawnSegment& s : bar.segments)
      b["segments"].push_back(
          {{"name", s.name}, {"bytes", s.bytes}, {"rect", Rect(s.rect)}, {"color", Color(s.color)}});
    mem["bars"].push_back(std::move(b));
  }
  j["memory"] = std::move(mem);
  return j.dump(2);
}

}  // namespace meshplan
