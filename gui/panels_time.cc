// DrawTimePanel: the predicted step time as one stacked horizontal bar (compute,
// recompute, exposed communication per mesh dimension, bubble, optimizer, exposed offload
// copies, compute slowed by overlapped communication: they add up to the step), the
// headline rates (tokens/s, MFU, HFU) and communication volume per dimension. The
// table lists the parts that take time, each as wide as its name, with the volume
// table beside it where both fit the panel's width, else below it.
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
  std::string help = "";  // the CLI's longer name, where the GUI shortens it
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
  parts.push_back({"slowed by overlap", t.overlap_slowdown_s, kColorOverlapSlowdown,
                   "compute slowed by overlapped comm. (the overlapped communication shares "
                   "the GPU with the compute)"});
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
  const std::string headline = fmt::format(
      "step {}   {} tokens/s   MFU {} (no attn. {})   HFU {}", FormatSeconds(c.time.total_s),
      FormatTokensPerS(c.tokens_per_s), FormatPercent(c.mfu), FormatPercent(c.mfu_no_attention),
      FormatPercent(c.hfu));
  ImGui::TextUnformatted(headline.c_str());
  RecordItemText(state.drawn, headline);
  const std::string per_gpu =
      fmt::format("per GPU: {} tokens/s   {} TFLOP/s (model)",
                  FormatTokensPerS(c.tokens_per_s_per_gpu), FormatTflops(c.model_flops_per_s_per_gpu));
  ImGui::TextUnformatted(per_gpu.c_str());
  RecordItemText(state.drawn, per_gpu);
  ColoredText(kColorDimText, kModelFlopsConvention);
  ColoredText(kColorDimText,
              fmt::format("step time {} (meshplan validate)", DescribeBand(state.band)));
  if (c.mfu_fp8_peak > 0)  // fp8: the MFU above is against the bf16 peak; name both
    ColoredText(kColorDimText,
                "MFU and HFU against the dense bf16 peak; MFU against the FP8 peak " +
                    FormatPercent(c.mfu_fp8_peak));
  const std::vector<TimePart> parts = TimeParts(c.time);
  DrawTimeBar(parts, c.time.total_s);

  const ImGuiTableFlags flags =
      ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_NoHostExtendX | ImGuiTableFlags_RowBg;
  const float right = ImGui::GetCursorScreenPos().x + ImGui::GetContentRegionAvail().x;
  if (ImGui::BeginTable("time parts", 3, flags)) {
    ImGui::TableSetupColumn("part");
    ImGui::TableSetupColumn("time");
    ImGui::TableSetupColumn("share");
    ImGui::TableHeadersRow();
    for (const TimePart& part : parts) {
      if (part.seconds <= 0) continue;  // as in the bar
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ColorSwatch(part.color, part.name.c_str());
      RecordItemText(state.drawn, part.name);
      TooltipOnHover(part.help);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(FormatSeconds(part.seconds).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(
          FormatPercent(c.time.total_s > 0 ? part.seconds / c.time.total_s : 0).c_str());
    }
    ImGui::EndTable();
  }
  // The volume table's width: its widest cells and the cells' padding.
  const float comm_width = ImGui::CalcTextSize("dim").x + ImGui::CalcTextSize("sent/GPU/step").x +
                           ImGui::CalcTextSize("000.0 ms").x +
                           ImGui::GetStyle().CellPadding.x * 6;
  SameLineIfFits(comm_width, right);
  if (ImGui::BeginTable("comm volume", 3, flags)) {
    ImGui::TableSetupColumn("dim");
    ImGui::TableSetupColumn("sent/GPU/step");
    ImGui::TableSetupColumn("exposed");
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
