// DrawKnobsPanel: one row of buttons per plan knob; only valid values can be
// clicked (the others are greyed, with the broken rule in a tooltip). A click
// sets the plan, and the next frame shows its consequences everywhere.
#include <imgui.h>
#include <imgui_stdlib.h>

#include "gui/imgui_util.h"
#include "gui/panels.h"

namespace meshplan {
namespace {

const char* KnobTitle(Knob knob) {
  switch (knob) {
    case Knob::kDp: return "data par.";
    case Knob::kTp: return "tensor par.";
    case Knob::kPp: return "pipeline par.";
    case Knob::kCp: return "context par.";
    case Knob::kEp: return "expert par.";
    case Knob::kZero: return "ZeRO stage";
    case Knob::kSequenceParallel: return "sequence par.";
    case Knob::kMicroBatch: return "micro-batch";
    case Knob::kRecompute: return "recompute";
    case Knob::kSchedule: return "schedule";
    case Knob::kVirtualStages: return "virtual stages";
    case Knob::kStageSplit: return "stage split";
  }
  return "?";
}

const char* KnobHelp(Knob knob) {
  switch (knob) {
    case Knob::kDp: return "dp: model replicas; trades against tp (dp*tp*pp*cp = GPUs)";
    case Knob::kTp: return "tp: Megatron tensor parallel inside a node; trades against dp";
    case Knob::kPp: return "pp: pipeline stages; takes GPUs from dp";
    case Knob::kCp: return "cp: context parallel (ring attention); takes GPUs from dp";
    case Knob::kEp:
      return "ep: routed experts split X/ep over ep of the dp ranks (MoE only); all-to-all "
             "dispatch and combine per MoE layer; adds no GPUs";
    case Knob::kZero: return "ZeRO: 0 plain DP, 1 optimizer sharded, 2 + grads, 3 + params (FSDP)";
    case Knob::kSequenceParallel: return "sp: Megatron sequence parallel over the tp group";
    case Knob::kMicroBatch: return "mbs: sequences per micro-batch per dp rank";
    case Knob::kRecompute: return "activation recomputation in the backward pass";
    case Knob::kSchedule: return "pipeline schedule (pp > 1)";
    case Knob::kVirtualStages: return "vpp: model chunks per pipeline rank (interleaved)";
    case Knob::kStageSplit:
      return "layers per pipeline stage: even, or first and last stage lighter "
             "(first_stage_layers, last_stage_layers; pp > 1; interleaved: the chunks at the "
             "model's ends give up the layers)";
  }
  return "";
}

void DrawKnobRow(ExplorerState& state, Knob knob) {
  const std::vector<KnobOption>& options = state.derived.knob_options[static_cast<int>(knob)];
  const int64_t current = KnobValue(state.inputs.plan, knob);
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted(KnobTitle(knob));
  TooltipOnHover(KnobHelp(knob));
  ImGui::TableNextColumn();
  const float right = ImGui::GetCursorScreenPos().x + ImGui::GetContentRegionAvail().x;
  ImGui::PushID(static_cast<int>(knob));
  bool first = true;
  for (const KnobOption& option : options) {
    const float width = ImGui::CalcTextSize(option.label.c_str()).x +
                        ImGui::GetStyle().FramePadding.x * 2;
    if (!first) SameLineIfFits(width, right);
    first = false;
    const bool is_current = option.value == current;
    if (is_current) {
      ImGui::PushStyleColor(ImGuiCol_Button, ImGui::GetStyleColorVec4(ImGuiCol_ButtonActive));
      ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1, 1, 1, 1));
    }
    ImGui::BeginDisabled(!option.valid);
    ImGui::PushID(static_cast<int>(option.value));
    if (ImGui::Button(option.label.c_str()) && option.valid && !is_current)
      SetPlan(state, option.plan);
    ImGui::PopID();
    ImGui::EndDisabled();
    if (is_current) ImGui::PopStyleColor(2);
    if (!option.valid)
      TooltipOnHover("not valid: " + option.note);
    else if (!option.note.empty() && !is_current)
      TooltipOnHover("also sets " + option.note);
  }
  ImGui::PopID();
}

// A checkbox for one boolean plan choice; a click sets the plan.
void PlanCheckbox(ExplorerState& state, const char* label, bool ParallelPlan::*field,
                  const char* help) {
  bool value = state.inputs.plan.*field;
  if (ImGui::Checkbox(label, &value)) {
    ParallelPlan plan = state.inputs.plan;
    plan.*field = value;
    SetPlan(state, plan);
  }
  TooltipOnHover(help);
}

// The overlap and offload choices (planner/parallel_plan.h; the search tries them per plan:
// planner/search/knob_variants.h). Offload needs the cluster's host: block.
void DrawOverlapOffloadKnobs(ExplorerState& state) {
  ImGui::TextDisabled("overlap and offload (the search chooses these per plan):");
  PlanCheckbox(state, "overlap TP communication with compute (tp_overlap)",
               &ParallelPlan::tp_comm_overlap,
               "hides TP collectives behind the GEMMs of their pass, which run slower while they "
               "do (comm_overlap_slowdown of the GPU)");
  PlanCheckbox(state, "overlap DP gradient sync with the backward (dp_overlap)",
               &ParallelPlan::dp_comm_overlap,
               "hides the gradient sync behind the backward, which runs slower while it does "
               "(comm_overlap_slowdown of the GPU); off: the sync runs after the backward");
  int prefetch = static_cast<int>(state.inputs.plan.zero3_prefetch);
  ImGui::SetNextItemWidth(ImGui::CalcTextSize("0000000").x);
  if (ImGui::SliderInt("ZeRO-3 prefetch depth (prefetch)", &prefetch, 0,
                       static_cast<int>(kMaxZero3Prefetch))) {
    ParallelPlan plan = state.inputs.plan;
    plan.zero3_prefetch = prefetch;
    SetPlan(state, plan);
  }
  TooltipOnHover("ZeRO-3 all-gathers issued ahead of the compute; 0 exposes every gather, each "
                 "more keeps one more gathered block in memory");
  const bool host = state.inputs.cluster.host.known();
  ImGui::BeginDisabled(!host);
  PlanCheckbox(state, "optimizer states and step on the host (offload_opt)",
               &ParallelPlan::offload_optimizer,
               "ZeRO-Offload: fp32 master and Adam m, v in host memory, AdamW on the CPU");
  PlanCheckbox(state, "activations to the host (offload_act)", &ParallelPlan::offload_activations,
               "saved activations copied out during the forward, back before the backward");
  PlanCheckbox(state, "parameter shard on the host (offload_params)", &ParallelPlan::offload_params,
               "ZeRO-Infinity: needs zero=3 and offload_opt");
  ImGui::EndDisabled();
  if (!host)
    ImGui::TextDisabled("offload: the cluster file has no host: block");
}

}  // namespace

void DrawKnobsPanel(ExplorerState& state) {
  const ParallelPlan& p = state.inputs.plan;
  ImGui::TextDisabled("%lld GPUs = dp %lld x tp %lld x pp %lld x cp %lld; greyed: not valid",
                      static_cast<long long>(state.inputs.cluster.world_size()),
                      static_cast<long long>(p.dp), static_cast<long long>(p.tp),
                      static_cast<long long>(p.pp), static_cast<long long>(p.cp));
  const ImGuiTableFlags flags = ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg;
  if (ImGui::BeginTable("knobs", 2, flags)) {
    ImGui::TableSetupColumn("knob", ImGuiTableColumnFlags_WidthFixed,
                            ImGui::CalcTextSize("virtual stages").x);
    ImGui::TableSetupColumn("values", ImGuiTableColumnFlags_WidthStretch);
    for (Knob knob : kAllKnobs) DrawKnobRow(state, knob);
    ImGui::EndTable();
  }

  DrawOverlapOffloadKnobs(state);

  ImGui::Spacing();
  ImGui::TextDisabled("plan (edit and press Enter):");
  ImGui::SetNextItemWidth(-1);
  if (ImGui::InputText("##plan", &state.ui.plan_text, ImGuiInputTextFlags_EnterReturnsTrue))
    SetPlanFromString(state, state.ui.plan_text);
  for (const PlanViolation& v : state.derived.violations) ColoredText(kColorErrorText, v.message);
  if (!state.derived.error.empty()) ColoredText(kColorErrorText, state.derived.error);
}

}  // namespace meshplan
