// DrawTimePanel: the predicted step time as one stacked horizontal bar (compute,
// recompute, exposed communication per mesh dimension, bubble, optimizer, exposed offload
// copies, compute slowed by overlapped communication: they add up to the step), the
// headline rates (tokens/s, MFU, HFU) and communication volume per dimension.
#include <imgui.h>

#include <fmt/format.h>

#include "gui/imgui_util.h"
#include "gui/panels.h"
#include "planner/cost/flops.h"
#include "planner/units_format.h"

namespace meshplan {
namespace {

struct TimePart {
  std::string name;
  double seconds;
  Rgb color;
};

std::vector<TimePart> TimeParts(const StepTimeBreakdown& t) {
  std::vector<TimePart> parts{{"compute", t.compute_s - t.recompute_s, kColorCompute},
                              {"recompute", t.recompute_s, kColorRecompute}};
  for (MeshDim dim : kAllCommDims)
    parts.push_back({fmt::format("{} comm (exposed)", ToString(dim)), t.exposed_comm_s[dim],
                     kColorCommByDim[static_cast<int>(dim)]});
  parts.push_back({"bubble", t.bubble_s, kColorBubble});
  parts.push_back({"optimizer", t.optimizer_s, kColorOptimizerStep});
  parts.push_back({"offload (exposed)", t.offload_s, kColorOffload});
  parts.push_back({"compute slowed by overlapped comm.", t.overlap_slowdown_s, kColorOverlapSlowdown});
  return parts;
}

void DrawTimeBar(const std::vector<TimePart>& parts, double total_s) {
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const float width = ImGui::GetContentRegionAvail().x, height = ImGui::GetFrameHeight() * 1.2f;
  float x = p0.x;
  for (const TimePart& part : parts) {
    if (part.seconds <= 0 || total_s <= 0) continue;
    const float w = static_cast<float>(part.seconds / total_s) * width;
    draw->AddRectFilled(ImVec2(x, p0.y), ImVec2(x + w, p0.y + height), ToImU32(part.color));
    x += w;
  }
  ImGui::Dummy(ImVec2(width, height));
}

}  // namespace

void DrawTimePanel(ExplorerState& state) {
  const ExplorerDerived& d = state.derived;
  if (!d.valid || !d.error.empty()) {
    ImGui::TextWrapped("No estimate: the plan is not valid (see Knobs).");
    return;
  }
  const PlanCost& c = d.cost;
  ImGui::Text("step %s   %s tokens/s   MFU %s (no attn. %s)   HFU %s",
              FormatSeconds(c.time.total_s).c_str(), FormatTokensPerS(c.tokens_per_s).c_str(),
              FormatPercent(c.mfu).c_str(), FormatPercent(c.mfu_no_attention).c_str(),
              FormatPercent(c.hfu).c_str());
  ImGui::Text("per GPU: %s tokens/s   %s TFLOP/s (model)",
              FormatTokensPerS(c.tokens_per_s_per_gpu).c_str(),
              FormatTflops(c.model_flops_per_s_per_gpu).c_str());
  ImGui::TextDisabled("%s", kModelFlopsConvention);
  ImGui::TextDisabled("step time %s (meshplan validate)", DescribeBand(state.band).c_str());
  if (c.mfu_fp8_peak > 0)  // fp8: the MFU above is against the bf16 peak; name both
    ImGui::TextDisabled("MFU and HFU against the dense bf16 peak; MFU against the FP8 peak %s",
                        FormatPercent(c.mfu_fp8_peak).c_str());
  const std::vector<TimePart> parts = TimeParts(c.time);
  DrawTimeBar(parts, c.time.total_s);

  const ImGuiTableFlags flags = ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_RowBg;
  const float half = ImGui::GetContentRegionAvail().x * 0.5f - ImGui::GetStyle().ItemSpacing.x;
  if (ImGui::BeginTable("time parts", 3, flags, ImVec2(half, 0))) {
    ImGui::TableSetupColumn("part", 0, 2.2f);
    ImGui::TableSetupColumn("time", 0, 1.0f);
    ImGui::TableSetupColumn("share", 0, 0.8f);
    ImGui::TableHeadersRow();
    for (const TimePart& part : parts) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ColorSwatch(part.color, part.name.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(FormatSeconds(part.seconds).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(
          FormatPercent(c.time.total_s > 0 ? part.seconds / c.time.total_s : 0).c_str());
    }
    ImGui::EndTable();
  }
  ImGui::SameLine();
  if (ImGui::BeginTable("comm volume", 3, flags, ImVec2(half, 0))) {
    ImGui::TableSetupColumn("dim", 0, 0.6f);
    ImGui::TableSetupColumn("sent/GPU/step", 0, 1.4f);
    ImGui::TableSetupColumn("exposed", 0, 1.0f);
    ImGui::TableHeadersRow();
    for (MeshDim dim : kAllCommDims) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(ToString(dim));
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(FormatGiB(c.comm_bytes_per_step[dim]).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(FormatSeconds(c.time.exposed_comm_s[dim]).c_str());
    }
    ImGui::EndTable();
  }
}

}  // namespace meshplan
