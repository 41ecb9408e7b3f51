// DrawKnobsPanel: one row of buttons per plan knob; only valid values can be
// clicked (the others are greyed, with the broken rule in a tooltip). A click
// sets the plan, and the next frame shows its consequences everywhere.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <fmt/format.h>

#include "gui/imgui_util.h"
#include "gui/panels.h"
#include "planner/plan_fields.h"

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

std::string KnobHelp(Knob knob) {
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
      return std::string("layers per pipeline stage: even, or first and last stage lighter (") +
             FieldSpec(PlanField::kFirstStageLayers).key + ", " +
             FieldSpec(PlanField::kLastStageLayers).key +
             "; pp > 1; interleaved: the chunks at the model's ends give up the layers)";
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
  RecordItemText(state.drawn, KnobTitle(knob));
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

// The choices the search tries on each plan (planner/plan_fields.h, PlanFieldRole::kChoice):
// a checkbox per boolean, a slider per integer, labelled by its plan key (its description
// in the tooltip); a click sets the plan. A choice that offloads needs the cluster's host: block.
void DrawChoiceKnobs(ExplorerState& state) {
  ColoredText(kColorDimText, "overlap and offload (the search picks these per plan):");
  TooltipOnHover("the search tries each of these on every plan; hover one for what it does");
  const bool host = state.inputs.cluster.host.known();
  for (const PlanFieldSpec& f : PlanFields()) {
    if (f.role != PlanFieldRole::kChoice) continue;
    ParallelPlan on;
    f.set(on, 1);
    ImGui::BeginDisabled(on.offloads() && !host);
    const std::string label = f.key;
    int value = static_cast<int>(f.get(state.inputs.plan));
    bool changed = false;
    if (f.kind == PlanFieldKind::kBool) {
      bool checked = value != 0;
      changed = ImGui::Checkbox(label.c_str(), &checked);
      value = checked ? 1 : 0;
    } else {
      ImGui::SetNextItemWidth(ImGui::CalcTextSize("0000000").x);
      changed = ImGui::SliderInt(label.c_str(), &value, static_cast<int>(f.min),
                                 static_cast<int>(f.max));
    }
    RecordItemText(state.drawn, label);
    if (changed) {
      ParallelPlan plan = state.inputs.plan;
      f.set(plan, value);
      SetPlan(state, plan);
    }
    TooltipOnHover(*f.help ? std::string(f.doc) + ": " + f.help : std::string(f.doc));
    ImGui::EndDisabled();
  }
  if (!host) ImGui::TextDisabled("offload: the cluster file has no host: block");
}

}  // namespace

void DrawKnobsPanel(ExplorerState& state) {
  const ParallelPlan& p = state.inputs.plan;
  ColoredText(kColorDimText, fmt::format("{} GPUs = dp {} x tp {} x pp {} x cp {}; greyed: not valid",
                                         state.inputs.cluster.world_size(), p.dp, p.tp, p.pp, p.cp));
  const ImGuiTableFlags flags = ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg;
  if (ImGui::BeginTable("knobs", 2, flags)) {
    ImGui::TableSetupColumn("knob", ImGuiTableColumnFlags_WidthFixed,
                            ImGui::CalcTextSize("virtual stages").x);
    ImGui::TableSetupColumn("values", ImGuiTableColumnFlags_WidthStretch);
    for (Knob knob : kAllKnobs) DrawKnobRow(state, knob);
    ImGui::EndTable();
  }

  DrawChoiceKnobs(state);

  ImGui::Spacing();
  ImGui::TextDisabled("plan (edit and press Enter):");
  ImGui::SetNextItemWidth(-1);
  if (ImGui::InputText("##plan", &state.ui.plan_text, ImGuiInputTextFlags_EnterReturnsTrue))
    SetPlanFromString(state, state.ui.plan_text);
  for (const PlanViolation& v : state.derived.violations) ColoredText(kColorErrorText, v.message);
  if (!state.derived.error.empty()) ColoredText(kColorErrorText, state.derived.error);
}

}  // namespace meshplan
