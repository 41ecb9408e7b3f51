// PlanFields: the one table of ParallelPlan's fields (planner/parallel_plan.h).
//
// Each field once: its key, its member (read and written as an int64_t: a bool as 0/1, an
// enum as its enumerator), its kind, the values it takes, a doc line, what the search does
// with it and how `meshplan run` treats it. Parsing and printing plan strings, the search's
// pins (--only), the plan: section of a plan file, search's JSON and CSV dump and the GUI's
// choices all walk this table, so a new plan field is one row here plus the code that
// computes with it. The rows are in plan-string order; the default of a field is its value
// in a default-constructed ParallelPlan.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "planner/parallel_plan.h"

namespace meshplan {

// The fields, in plan-string order (ToPlanString, --only, a plan file's plan: section).
enum class PlanField : uint8_t {
  kDp, kTp, kPp, kCp, kEp, kZero, kSp, kMbs, kRecompute, kSchedule, kVpp, kTpOverlap, kPpOverlap,
  kFirstStageLayers, kLastStageLayers, kOffloadOpt, kOffloadAct, kOffloadParams, kDpOverlap,
  kPrefetch, kCount
};
inline constexpr int kNumPlanFields = static_cast<int>(PlanField::kCount);

enum class PlanFieldKind : uint8_t { kInt, kBool, kEnum };

// What the search does with a field: an axis of its grid (planner/search/plan_space.h; a
// column of --dump and of --format json's "fields"), or a choice it tries on each grid
// point (planner/search/knob_variants.h; PlanPins::SetKnobs sets these).
enum class PlanFieldRole : uint8_t { kAxis, kChoice };

// How `meshplan run` treats a field (planner/executor_support.h ExecutorLimitations): it runs
// what the field asks, or it refuses (exit 2, naming the key) any value but the default.
// tests/executor/plan_fields_run_test.cc holds every row to its mark.
enum class ExecutorSupport : uint8_t { kHonoured, kRefusedUnlessDefault };

struct PlanFieldSpec {
  PlanField id;
  const char* key;  // plan strings, plan files and --only ("mbs")
  const char* doc;  // what it sets, one line
  PlanFieldKind kind;
  PlanFieldRole role;
  bool always_printed;  // ToPlanString prints it at its default too
  int64_t (*get)(const ParallelPlan&);
  void (*set)(ParallelPlan&, int64_t);
  const char* help = "";  // more, where the doc line is not enough (the GUI's tooltip)
  // kInt: a pin takes [min, max]; ParsePlanString reads values up to parse_max (CheckPlan
  // judges the others) and refuses larger ones, naming `allowed`. With a limit (the
  // docs/limits.md bound, e.g. "kMaxGpus") max is that bound and a pin below min reads
  // "must be >= min"; without, [min, max] is the field's whole range, named by `allowed`.
  int64_t min = 0, max = 1, parse_min = INT64_MIN, parse_max = 1;
  const char* limit = nullptr;
  std::string allowed{};  // kInt: the range in words; kEnum: the names ("none, selective, full")
  // kEnum: the name of a value, and the value of a name (false: unknown).
  std::string (*name)(int64_t) = nullptr;
  bool (*parse)(const std::string&, int64_t*) = nullptr;
  ExecutorSupport executor = ExecutorSupport::kHonoured;
  // kRefusedUnlessDefault: what the executor does instead, for the refusal's message.
  const char* executor_instead = nullptr;

  int64_t default_value = 0;  // its value in a default ParallelPlan (filled in by the table)

  bool is_default(const ParallelPlan& plan) const { return get(plan) == default_value; }
};

// The recompute field's value as the table reads it (one int64_t, what PlanPins and the
// GUI's choices hold): the kind's enumerator, plus kRecomputePeriodUnit x N for every:N.
inline constexpr int64_t kRecomputePeriodUnit = 256;
int64_t RecomputeCode(const RecomputePolicy& policy);
RecomputePolicy RecomputeOfCode(int64_t code);

// Every field, indexed by PlanField.
std::span<const PlanFieldSpec> PlanFields();
inline const PlanFieldSpec& FieldSpec(PlanField field) {
  return PlanFields()[static_cast<size_t>(field)];
}
// The field named `key`, or nullptr.
const PlanFieldSpec* FindPlanField(std::string_view key);
// "dp, tp, pp, ...": every key, in table order (for "allowed" in messages).
const std::string& PlanFieldKeyList();

// One key=value item of a plan string: its row and its value.
struct PlanFieldValue {
  const PlanFieldSpec* field;
  int64_t value;
};
// The items of a plan string ("dp=2,zero=1"; empty items skipped), in the order given.
// Throws InputError at `source` naming the key: an item without '=', an unknown key (listing
// the allowed), a key given twice, a value ParseFieldValue refuses.
std::vector<PlanFieldValue> ParsePlanFields(const std::string& text, const std::string& source);

// `text` as a value of `field` (a plan string's or a plan file's spelling). Throws
// InputError at `source` naming the key and the allowed values.
int64_t ParseFieldValue(const PlanFieldSpec& field, const std::string& text,
                        const std::string& source);
// `value` as a plan string spells it: "4", "1" / "0", "selective".
std::string FormatFieldValue(const PlanFieldSpec& field, int64_t value);
// The check of a pinned value (--only): within [min, max]; throws InputError otherwise.
void CheckPinValue(const PlanFieldSpec& field, int64_t value, const std::string& source);

}  // namespace meshplan
