#include "planner/parallel_plan.h"

#include <charconv>
#include <sstream>

#include "planner/input_error.h"
#include "planner/names.h"

namespace meshplan {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

}  // namespace

std::vector<PlanViolation> Validate(const ParallelPlan& plan, const ModelSpec& model,
                                    const TrainingSpec& training, int64_t world_size) {
  std::vector<PlanViolation> out;
  auto fail = [&out](const char* constraint, std::string message) {
    out.push_back({constraint, std::move(message)});
  };

  const std::pair<const char*, int64_t> factors[] = {
      {"dp", plan.dp}, {"tp", plan.tp}, {"pp", plan.pp}, {"cp", plan.cp},
      {"mbs", plan.micro_batch}, {"vpp", plan.virtual_stages}};
  for (const auto& [name, value] : factors)
    if (value < 1) fail("factors_positive", std::string(name) + "=" + Str(value) + " must be >= 1");
  if (!out.empty()) return out;  // the divisibility checks below need positive factors

  if (plan.zero_stage < 0 || plan.zero_stage > 3)
    fail("zero_stage_range", "zero=" + Str(plan.zero_stage) + " must be one of 0, 1, 2, 3");
  if (world_size > 0 && plan.world_size() != world_size)
    fail("world_size", "dp*tp*pp*cp = " + Str(plan.dp) + "*" + Str(plan.tp) + "*" + Str(plan.pp) +
                           "*" + Str(plan.cp) + " = " + Str(plan.world_size()) +
                           ", but the cluster has " + Str(world_size) + " GPUs");
  if (model.heads % plan.tp != 0)
    fail("tp_divides_heads", "tp=" + Str(plan.tp) + " does not divide heads=" + Str(model.heads));
  if (model.kv_heads % plan.tp != 0)
    fail("tp_divides_kv_heads",
         "tp=" + Str(plan.tp) + " does not divide kv_heads=" + Str(model.kv_heads));
  if (model.ffn_hidden % plan.tp != 0)
    fail("tp_divides_ffn",
         "tp=" + Str(plan.tp) + " does not divide ffn_hidden=" + Str(model.ffn_hidden));
  if (model.layers % (plan.pp * plan.virtual_stages) != 0)
    fail("pp_divides_layers", "pp*vpp=" + Str(plan.pp) + "*" + Str(plan.virtual_stages) +
                                  " does not divide layers=" + Str(model.layers));
  // Causal load balancing gives each cp rank one early and one late chunk: 2*cp chunks.
  const int64_t cp_chunks = plan.cp > 1 ? 2 * plan.cp : 1;
  if (training.seq_len % cp_chunks != 0)
    fail("cp_divides_seq", "seq=" + Str(training.seq_len) + " is not divisible by 2*cp=" +
                               Str(cp_chunks) + " (load-balanced context parallel)");
  if (plan.sequence_parallel && plan.tp == 1)
    fail("sp_needs_tp", "sp=1 needs tp > 1 (sequence parallel shards over the tp group)");
  if (plan.sequence_parallel && (training.seq_len / plan.cp) % plan.tp != 0)
    fail("tp_divides_seq", "sp=1 shards seq/cp=" + Str(training.seq_len / plan.cp) +
                               " over tp=" + Str(plan.tp) + ", which does not divide it");
  if (training.global_batch % (plan.dp * plan.micro_batch) != 0)
    fail("batch_divides", "global_batch=" + Str(training.global_batch) +
                              " is not divisible by dp*mbs=" + Str(plan.dp) + "*" +
                              Str(plan.micro_batch));
  const bool interleaved = plan.schedule == PipelineSchedule::kInterleaved;
  if (plan.virtual_stages > 1 && !interleaved)
    fail("vpp_needs_interleaved", "vpp=" + Str(plan.virtual_stages) +
                                      " needs schedule=interleaved (schedule is " +
                                      ToString(plan.schedule) + ")");
  if (interleaved && (plan.pp < 2 || plan.virtual_stages < 2))
    fail("interleaved_needs_pp_vpp", "schedule=interleaved needs pp >= 2 and vpp >= 2 (pp=" +
                                         Str(plan.pp) + ", vpp=" + Str(plan.virtual_stages) + ")");
  if (interleaved && plan.pp > 1 && training.global_batch % (plan.dp * plan.micro_batch) == 0 &&
      plan.num_microbatches(training.global_batch) % plan.pp != 0)
    fail("interleaved_microbatches",
         "schedule=interleaved needs micro-batches=" +
             Str(plan.num_microbatches(training.global_batch)) + " divisible by pp=" + Str(plan.pp));
  if (model.max_seq > 0 && training.seq_len > model.max_seq)
    fail("seq_within_max", "seq=" + Str(training.seq_len) + " exceeds the model's max_seq=" +
                               Str(model.max_seq));
  return out;
}

namespace {

int64_t ParseInt(const std::string& source, const std::string& key, const std::string& value) {
  int64_t out = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (ec != std::errc() || ptr != end)
    throw InputError({source}, key, "expected an integer, got '" + value + "'");
  return out;
}

bool ParseBool(const std::string& source, const std::string& key, const std::string& value) {
  if (value == "1" || value == "true" || value == "on" || value == "yes") return true;
  if (value == "0" || value == "false" || value == "off" || value == "no") return false;
  throw InputError({source}, key, "expected one of: 0, 1, true, false, on, off; got '" + value + "'");
}

}  // namespace

ParallelPlan ParsePlanString(const std::string& text, const std::string& source) {
  ParallelPlan plan;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      throw InputError({source}, item, "expected key=value (e.g. tp=4)");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "dp") plan.dp = ParseInt(source, key, value);
    else if (key == "tp") plan.tp = ParseInt(source, key, value);
    else if (key == "pp") plan.pp = ParseInt(source, key, value);
    else if (key == "cp") plan.cp = ParseInt(source, key, value);
    else if (key == "mbs") plan.micro_batch = ParseInt(source, key, value);
    else if (key == "vpp") plan.virtual_stages = ParseInt(source, key, value);
    else if (key == "zero") plan.zero_stage = static_cast<int>(ParseInt(source, key, value));
    else if (key == "sp") plan.sequence_parallel = ParseBool(source, key, value);
    else if (key == "tp_overlap") plan.tp_comm_overlap = ParseBool(source, key, value);
    else if (key == "recompute") {
      if (!ParseRecompute(value, &plan.recompute))
        throw InputError({source}, key, "expected one of: " + std::string(AllowedRecomputes()) +
                                            "; got '" + value + "'");
    } else if (key == "schedule") {
      if (!ParsePipelineSchedule(value, &plan.schedule))
        throw InputError({source}, key, "expected one of: " +
                                            std::string(AllowedPipelineSchedules()) + "; got '" +
                                            value + "'");
    } else {
      throw InputError({source}, key,
                       "unknown key; allowed: dp, tp, pp, cp, zero, sp, mbs, recompute, schedule, "
                       "vpp, tp_overlap");
    }
  }
  return plan;
}

std::string ToPlanString(const ParallelPlan& p) {
  std::string s = "dp=" + Str(p.dp) + ",tp=" + Str(p.tp) + ",pp=" + Str(p.pp) + ",cp=" + Str(p.cp) +
                  ",zero=" + Str(p.zero_stage) + ",sp=" + (p.sequence_parallel ? "1" : "0") +
                  ",mbs=" + Str(p.micro_batch) + ",recompute=" + ToString(p.recompute) +
                  ",schedule=" + ToString(p.schedule) + ",vpp=" + Str(p.virtual_stages);
  if (p.tp_comm_overlap) s += ",tp_overlap=1";
  return s;
}

}  // namespace meshplan
