#include "gui/imgui_util.h"

namespace meshplan {

void ColorSwatch(Rgb color, const char* label) {
  const float size = ImGui::GetTextLineHeight() * 0.8f;
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float pad = (ImGui::GetTextLineHeight() - size) * 0.5f;
  ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x, p.y + pad),
                                            ImVec2(p.x + size, p.y + pad + size), ToImU32(color));
  ImGui::Dummy(ImVec2(size, ImGui::GetTextLineHeight()));
  ImGui::SameLine();
  ImGui::TextUnformatted(label);
}

void ColoredText(Rgb color, const std::string& text) {
  ImGui::PushStyleColor(ImGuiCol_Text, ToImVec4(color));
  ImGui::TextWrapped("%s", text.c_str());
  ImGui::PopStyleColor();
}

void ColoredLabel(Rgb color, const std::string& text) {
  ImGui::PushStyleColor(ImGuiCol_Text, ToImVec4(color));
  ImGui::TextUnformatted(text.c_str());
  ImGui::PopStyleColor();
}

void TooltipOnHover(const std::string& text) {
  if (!text.empty() && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 30.0f);
    ImGui::TextUnformatted(text.c_str());
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
}

void SameLineIfFits(float width, float right) {
  const float next = ImGui::GetItemRectMax().x + ImGui::GetStyle().ItemSpacing.x + width;
  if (next <= right) ImGui::SameLine();
}

void SlotLabel(DrawnLayout& layout, const std::string& text, float x0, float x1, float y,
               float bottom, ImU32 color) {
  const ImVec2 size = ImGui::CalcTextSize(text.c_str());
  if (size.x > x1 - x0 - 2) return;
  const ImVec2 at(x0 + (x1 - x0 - size.x) * 0.5f, y);
  ImGui::GetWindowDrawList()->AddText(at, color, text.c_str());
  RecordText(layout, text, at, ImVec2(at.x + size.x, at.y + size.y), ImVec2(x0, y),
             ImVec2(x1, bottom));
}

void RecordPanel(DrawnLayout& layout, const char* name, bool tab) {
  const ImVec2 pos = ImGui::GetWindowPos(), size = ImGui::GetWindowSize();
  layout.panels.push_back({name, ToDrawnRect(pos, ImVec2(pos.x + size.x, pos.y + size.y)), tab});
}

void RecordText(DrawnLayout& layout, const std::string& text, ImVec2 min, ImVec2 max,
                ImVec2 fit_min, ImVec2 fit_max) {
  layout.texts.push_back({layout.panels.empty() ? "" : layout.panels.back().name, text,
                          ToDrawnRect(min, max), ToDrawnRect(fit_min, fit_max)});
}

std::string WithinLines(const std::string& items, char separator, float width, int lines) {
  const float most = static_cast<float>(lines) * ImGui::GetTextLineHeight() + 0.5f;
  auto fits = [&](const std::string& text) {
    return ImGui::CalcTextSize(text.c_str(), nullptr, false, width).y <= most;
  };
  if (fits(items)) return items;
  for (size_t cut = items.rfind(separator); cut != std::string::npos && cut > 0;
       cut = items.rfind(separator, cut - 1)) {
    const std::string shown = items.substr(0, cut + 1) + "...";
    if (fits(shown)) return shown;
  }
  return "...";
}

void RecordItemText(DrawnLayout& layout, const std::string& text) {
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const float scroll = ImGui::GetScrollY(), scroll_max = ImGui::GetScrollMaxY();
  const ImVec2 clip_min = draw->GetClipRectMin(), clip_max = draw->GetClipRectMax();
  RecordText(layout, text, ImGui::GetItemRectMin(), ImGui::GetItemRectMax(),
             ImVec2(clip_min.x, clip_min.y - scroll),
             ImVec2(clip_max.x, clip_max.y + scroll_max - scroll));
}

}  // namespace meshplan
