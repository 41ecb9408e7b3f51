// DrawSetupPanel: model and cluster (from configs/, a file, a HF config.json or
// NxGPU), global batch, sequence length, precision and the framework that runs the plan.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <filesystem>
#include <fmt/format.h>

#include "gui/imgui_util.h"
#include "gui/panels.h"
#include "planner/cost/cost_report.h"
#include "planner/cost/param_count.h"
#include "planner/names.h"
#include "planner/units_format.h"

namespace meshplan {
namespace {

// How the combo names what was loaded: a configs name as it is, a path by its file's
// stem (a HF config.json by its folder), the full path in the tooltip.
std::string ShortSourceName(const std::string& source) {
  const std::filesystem::path path(source);
  if (!path.has_parent_path()) return source;
  return path.stem() == "config" ? path.parent_path().filename().string() : path.stem().string();
}

// Records a closed combo's preview `shown` against its room: the frame less its arrow.
void RecordComboPreview(ExplorerState& state, const std::string& shown) {
  const ImVec2 frame0 = ImGui::GetItemRectMin(), pad = ImGui::GetStyle().FramePadding;
  const ImVec2 text0(frame0.x + pad.x, frame0.y + pad.y), size = ImGui::CalcTextSize(shown.c_str());
  const float room_right = frame0.x + ImGui::CalcItemWidth() - ImGui::GetFrameHeight();
  RecordText(state.drawn, shown, text0, ImVec2(text0.x + size.x, text0.y + size.y), frame0,
             ImVec2(room_right, ImGui::GetItemRectMax().y));
}

// A combo over `names` showing `current` by its short name; picking one calls `load(name)`.
template <typename Load>
void NameCombo(ExplorerState& state, const char* label, const std::string& current,
               const std::vector<std::string>& names, Load load) {
  const std::string shown = ShortSourceName(current);
  if (!ImGui::BeginCombo(label, shown.c_str())) {
    RecordComboPreview(state, shown);
    if (shown != current) TooltipOnHover(current);
    return;
  }
  for (const std::string& name : names) {
    const bool selected = name == current;
    if (ImGui::Selectable(name.c_str(), selected) && !selected) load(name);
    if (selected) ImGui::SetItemDefaultFocus();
  }
  ImGui::EndCombo();
}

void DrawModelSummary(const ModelSpec& m) {
  ColoredText(kColorDimText,
              fmt::format("{}{}, {} params; E={} L={} H={} K={} F={} V={}", ToString(m.block),
                          m.gated_ffn() ? "" : " (squared-ReLU FFN)",
                          FormatCount(static_cast<double>(CountParams(m))), m.hidden, m.layers,
                          m.heads, m.kv_heads, m.ffn_hidden, m.vocab_size));
  if (m.moe.enabled())
    ColoredText(kColorDimText,
                fmt::format("MoE: {} experts, top-{}, {} shared, Fe={}, {} active params",
                            m.moe.experts, m.moe.top_k, m.moe.shared_experts,
                            m.moe.expert_ffn_hidden,
                            FormatCount(static_cast<double>(CountActiveParams(m)))));
}

void DrawClusterSummary(const ClusterSpec& c) {
  ColoredText(kColorDimText, fmt::format("{}; {:.0f} TFLOP/s bf16", DescribeCluster(c),
                                         c.gpu.peak_flops_bf16 / 1e12));
}

}  // namespace

void DrawSetupPanel(ExplorerState& state) {
  const ExplorerInputs& in = state.inputs;
  ImGui::PushItemWidth(-ImGui::GetFontSize() * 6.5f);

  // --- model -----------------------------------------------------------------
  NameCombo(state, "model", in.model_source, state.model_names,
            [&](const std::string& name) { LoadModelInto(state, name); });
  ImGui::InputTextWithHint("##hf", "path to a HF config.json or YAML", &state.ui.hf_config_path);
  ImGui::SameLine();
  if (ImGui::Button("load model") && !state.ui.hf_config_path.empty())
    LoadModelInto(state, state.ui.hf_config_path);
  DrawModelSummary(in.model);
  ImGui::Spacing();

  // --- cluster -----------------------------------------------------------------
  NameCombo(state, "cluster", in.cluster_source, state.cluster_names,
            [&](const std::string& name) { LoadClusterInto(state, name); });
  ImGui::InputTextWithHint("##nx", "NxGPU, e.g. 64xh100-sxm, or a path", &state.ui.cluster_shorthand);
  ImGui::SameLine();
  if (ImGui::Button("load cluster") && !state.ui.cluster_shorthand.empty())
    LoadClusterInto(state, state.ui.cluster_shorthand);
  DrawClusterSummary(in.cluster);
  ImGui::Spacing();

  // --- training ---------------------------------------------------------------
  TrainingSpec training = in.training;
  const int64_t step_one = 1, step_seq = 512;
  bool changed = false;
  changed |= ImGui::InputScalar("global batch", ImGuiDataType_S64, &training.global_batch,
                                &step_one, nullptr, "%lld", ImGuiInputTextFlags_EnterReturnsTrue);
  changed |= ImGui::InputScalar("sequence", ImGuiDataType_S64, &training.seq_len, &step_seq,
                                nullptr, "%lld", ImGuiInputTextFlags_EnterReturnsTrue);
  if (ImGui::BeginCombo("precision", ToString(training.precision))) {
    for (Precision p : {Precision::kBf16, Precision::kMixed, Precision::kFp32, Precision::kFp8}) {
      // fp8 only where the GPU has FP8 tensor cores (the CLI refuses it the same way).
      const std::string why = WhyPrecisionUnsupported(in.cluster.gpu, p);
      if (ImGui::Selectable(ToString(p), p == training.precision,
                            why.empty() ? 0 : ImGuiSelectableFlags_Disabled)) {
        training.precision = p;
        changed = true;
      }
      if (!why.empty() && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
        ImGui::SetTooltip("%s", why.c_str());
    }
    ImGui::EndCombo();
  }
  if (changed && training.global_batch > 0 && training.seq_len > 0) SetTraining(state, training);
  // The software that runs the plan (configs/frameworks/): its kernels, dtypes and buffers.
  NameCombo(state, "framework", in.training.framework.name, state.framework_names,
            [&](const std::string& name) { LoadFrameworkInto(state, name); });
  ImGui::PopItemWidth();
  ImGui::TextDisabled("%s tokens per step",
                      FormatCount(static_cast<double>(in.training.tokens_per_step())).c_str());

  if (!state.ui.error.empty()) ColoredText(kColorErrorText, state.ui.error);
  if (!state.ui.status.empty()) ColoredText(kColorDimText, state.ui.status);
}

}  // namespace meshplan
