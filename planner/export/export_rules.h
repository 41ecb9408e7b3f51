// What the export targets share (planner/export/*.cc only): the job they write for, the
// refusal of a knob a target cannot express, and the writers ExportPlan() dispatches to.
// Each writer checks the knobs first and builds its text after, so a refusal leaves nothing.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "planner/export/export.h"
#include "planner/plan_fields.h"

namespace meshplan {

struct ExportJob {
  const PlanFile& file;
  ExportTarget target;
  std::string plan_path;
  const ParallelPlan& plan() const { return file.plan; }
  const ModelSpec& model() const { return file.model; }
};

// Throws export.h's InputError: at the plan file, field `knob`, "`value` cannot be expressed
// in <target>: `why`".
[[noreturn]] void Refuse(const ExportJob& job, const std::string& knob, const std::string& value,
                         const std::string& why);
// The same for a plan field, its value spelled as plan strings spell it ("schedule", "zb_h1").
[[noreturn]] void Refuse(const ExportJob& job, PlanField field, const std::string& why);
// Refuses the first plan field, in table order, that is not at its default and not `mapped`
// ("<target> has no setting for it").
void RefuseUnmapped(const ExportJob& job, std::initializer_list<PlanField> mapped);
// Refuses the plan's recompute policy when configs/frameworks/<profile>.yaml does not offer it
// (the profile's `recompute:` list, read from the framework's source: planner/framework_spec.h).
void RefuseUnofferedRecompute(const ExportJob& job, const char* profile);
// Refuses a pipeline schedule (pp > 1 only: one stage has none) that `offered` does not hold.
void RefuseSchedule(const ExportJob& job, std::initializer_list<PipelineSchedule> offered,
                    const std::string& why);

// `word` as one bash word: as it is when it holds only safe characters, else single-quoted.
std::string ShellWord(const std::string& word);
// `text` on one line, for a comment: control characters (a newline in a path) become '?'.
std::string CommentText(std::string text);
// Lines of a bash array assignment, one item per line: NAME=(\n  item\n  ...\n)\n.
std::string BashArray(const std::string& name, const std::vector<std::string>& items);

// The writers, one file each (planner/export/<target>.cc).
std::string ExportMegatron(const ExportJob& job);
std::string ExportMegatronBridge(const ExportJob& job);
std::string ExportTorchtitan(const ExportJob& job);
std::string ExportDeepspeed(const ExportJob& job);
std::string ExportTorchrun(const ExportJob& job);

}  // namespace meshplan
