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

void RecordPanel(DrawnLayout& layout, const char* name) {
  const ImVec2 pos = ImGui::GetWindowPos(), size = ImGui::GetWindowSize();
  layout.panels.push_back({name, ToDrawnRect(pos, ImVec2(pos.x + size.x, pos.y + size.y))});
}

}  // namespace meshplan
