// ExportPlan (planner/export/export.h): the target names, the shared refusals and the dispatch.
#include "planner/export/export.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>

#include "planner/config/framework_yaml.h"
#include "planner/export/export_rules.h"
#include "planner/input_error.h"
#include "planner/names.h"

namespace meshplan {
namespace {

constexpr std::array<ExportTarget, 5> kTargets = {
    ExportTarget::kMegatron, ExportTarget::kMegatronBridge, ExportTarget::kTorchtitan,
    ExportTarget::kDeepspeed, ExportTarget::kTorchrun};

}  // namespace

const char* ToString(ExportTarget target) {
  switch (target) {
    case ExportTarget::kMegatron: return "megatron";
    case ExportTarget::kMegatronBridge: return "megatron-bridge";
    case ExportTarget::kTorchtitan: return "torchtitan";
    case ExportTarget::kDeepspeed: return "deepspeed";
    case ExportTarget::kTorchrun: return "torchrun";
  }
  return "?";
}

bool ParseExportTarget(const std::string& name, ExportTarget* out) {
  for (ExportTarget target : kTargets) {
    if (Lower(name) == ToString(target)) {
      *out = target;
      return true;
    }
  }
  return false;
}

const char* AllowedExportTargets() {
  return "megatron, megatron-bridge, torchtitan, deepspeed, torchrun";
}

void Refuse(const ExportJob& job, const std::string& knob, const std::string& value,
            const std::string& why) {
  throw InputError({job.plan_path}, knob,
                   value + " cannot be expressed in " + ToString(job.target) + ": " + why);
}

void Refuse(const ExportJob& job, PlanField field, const std::string& why) {
  const PlanFieldSpec& spec = FieldSpec(field);
  Refuse(job, spec.key, FormatFieldValue(spec, spec.get(job.plan())), why);
}

void RefuseUnmapped(const ExportJob& job, std::initializer_list<PlanField> mapped) {
  for (const PlanFieldSpec& spec : PlanFields()) {
    if (spec.is_default(job.plan()) ||
        std::find(mapped.begin(), mapped.end(), spec.id) != mapped.end())
      continue;
    Refuse(job, spec.id,
           std::string(ToString(job.target)) + " has no setting for " + spec.doc +
               " (export the plan with " + spec.key + " at its default)");
  }
}

void RefuseUnofferedRecompute(const ExportJob& job, const char* profile) {
  const RecomputeOffer offer = LoadFramework(profile).recompute;
  if (!Offers(offer, job.plan().recompute.kind))
    Refuse(job, PlanField::kRecompute,
           std::string("its framework profile (configs/frameworks/") + profile + ".yaml) offers " +
               OfferedRecomputes(offer));
}

void RefuseSchedule(const ExportJob& job, std::initializer_list<PipelineSchedule> offered,
                    const std::string& why) {
  if (job.plan().pp > 1 &&
      std::find(offered.begin(), offered.end(), job.plan().schedule) == offered.end())
    Refuse(job, PlanField::kSchedule, why);
}

std::string ShellWord(const std::string& word) {
  const bool safe = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           (c != '\0' && std::strchr("-_.,/=:+@%", c) != nullptr);
  });
  if (safe) return word;
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string CommentText(std::string text) {
  for (char& c : text)
    if (std::iscntrl(static_cast<unsigned char>(c))) c = '?';
  return text;
}

std::string BashArray(const std::string& name, const std::vector<std::string>& items) {
  std::string text = name + "=(\n";
  for (const std::string& item : items) text += "  " + item + "\n";
  return text + ")\n";
}

std::string ExportPlan(const PlanFile& plan_file, ExportTarget target,
                       const std::string& plan_path) {
  const ExportJob job{plan_file, target, plan_path};
  switch (target) {
    case ExportTarget::kMegatron: return ExportMegatron(job);
    case ExportTarget::kMegatronBridge: return ExportMegatronBridge(job);
    case ExportTarget::kTorchtitan: return ExportTorchtitan(job);
    case ExportTarget::kDeepspeed: return ExportDeepspeed(job);
    case ExportTarget::kTorchrun: return ExportTorchrun(job);
  }
  return "";
}

}  // namespace meshplan
