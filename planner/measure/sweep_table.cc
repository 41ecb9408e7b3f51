// Sweep records -> table rows (see sweep_table.h).
#include "planner/measure/sweep_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "planner/input_error.h"
#include "planner/limits.h"
#include "planner/units_format.h"

namespace meshplan {
namespace {

using nlohmann::json;

// The value at a '/'-separated path ("estimate/setup/model"), InputError when absent.
const json& At(const json& root, const std::string& path, const std::string& source) {
  const json* node = &root;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = std::min(path.find('/', start), path.size());
    const std::string key = path.substr(start, slash - start);
    if (!node->is_object() || !node->contains(key))
      throw InputError({source}, path, "missing field; expected a sweep record (scripts/gpu_sweep.sh)");
    node = &(*node)[key];
    start = slash + 1;
  }
  return *node;
}

double Number(const json& root, const std::string& path, const std::string& source) {
  const json& v = At(root, path, source);
  if (!v.is_number()) throw InputError({source}, path, "expected a number, got " + v.dump());
  return v.get<double>();
}

std::string Text(const json& root, const std::string& path, const std::string& source) {
  const json& v = At(root, path, source);
  if (!v.is_string()) throw InputError({source}, path, "expected a string, got " + v.dump());
  return v.get<std::string>();
}

// The comparison figure named `prefix...` (e.g. "peak memory rank 0"), with a prediction;
// its path ("comparison/figures[3]") in *path.
const json& Figure(const json& record, const std::string& prefix, const std::string& source,
                   std::string* path) {
  const json& figures = At(record, "comparison/figures", source);
  if (!figures.is_array())
    throw InputError({source}, "comparison/figures",
                     "expected a list of figures, got " + figures.dump());
  for (size_t i = 0; i < figures.size(); ++i) {
    const json& f = figures[i];
    if (!f.is_object() || !f.contains("figure") || !f["figure"].is_string() ||
        f["figure"].get<std::string>().rfind(prefix, 0) != 0)
      continue;
    *path = "comparison/figures[" + std::to_string(i) + "]";
    if (!f.contains("predicted") || !f["predicted"].is_number())
      throw InputError({source}, *path,
                       "'" + prefix + "' has no prediction (was the hardware calibrated "
                       "for this device?)");
    return f;
  }
  throw InputError({source}, "comparison/figures", "no '" + prefix + "' figure");
}

// A number of a JSON object (a figure, a rank) at `path/key`, InputError when absent or not one.
double NumberIn(const json& object, const std::string& key, const std::string& path,
                const std::string& source) {
  const std::string field = path + "/" + key;
  if (!object.contains(key)) throw InputError({source}, field, "missing field; expected a number");
  const json& v = object[key];
  if (!v.is_number()) throw InputError({source}, field, "expected a number, got " + v.dump());
  return v.get<double>();
}

// `value` (read at `path`) when in [min, max] (a physical quantity: planner/limits.h).
double InRange(double value, double min, double max, const std::string& path,
               const std::string& source) {
  if (!(value >= min && value <= max))
    throw InputError({source}, path, fmt::format("value {} is out of range; expected a number "
                                                 "from {:g} to {:g} (docs/limits.md)",
                                                 value, min, max));
  return value;
}

// A count (seq_len, global_batch) as an integer in [0, max].
int64_t Count(const json& root, const std::string& path, const std::string& source, int64_t max) {
  const double v = Number(root, path, source);
  if (!(v >= 0 && v <= static_cast<double>(max)))
    throw InputError({source}, path, fmt::format("value {} is out of range; expected 0 to {}", v, max));
  return static_cast<int64_t>(v);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

SweepRow SweepRowFromJson(const json& record, const std::string& source) {
  if (Text(record, "record", source) != "meshplan sweep v1")
    throw InputError({source}, "record", "expected \"meshplan sweep v1\"");
  SweepRow r;
  r.name = Text(record, "name", source);
  r.device = Text(record, "measured/environment/device", source);
  r.hardware = Text(record, "estimate/setup/gpu", source);
  r.model = Text(record, "estimate/setup/model", source);
  r.plan = Text(record, "estimate/setup/plan", source);
  r.precision = Text(record, "estimate/setup/precision", source);
  r.seq_len = Count(record, "estimate/setup/seq_len", source, kMaxSeqLen);
  r.global_batch = Count(record, "estimate/setup/global_batch", source, kMaxGlobalBatch);

  std::string path;
  const json& step = Figure(record, "step time", source, &path);
  r.predicted_step_s = InRange(NumberIn(step, "predicted", path, source), kMinStepTimeS,
                               kMaxStepTimeS, path + "/predicted", source);
  r.measured_step_s = InRange(NumberIn(step, "measured", path, source), kMinStepTimeS,
                              kMaxStepTimeS, path + "/measured", source);
  r.step_error_pct = NumberIn(step, "error_pct", path, source);
  const json& memory = Figure(record, "peak memory rank 0", source, &path);
  r.predicted_peak_bytes =
      InRange(NumberIn(memory, "predicted", path, source), 0, 1e18, path + "/predicted", source);
  r.measured_peak_bytes =
      InRange(NumberIn(memory, "measured", path, source), 0, 1e18, path + "/measured", source);
  r.memory_error_pct = NumberIn(memory, "error_pct", path, source);
  const json& ranks = At(record, "measured/ranks", source);
  if (ranks.is_array() && !ranks.empty() && ranks[0].is_object() &&
      ranks[0].contains("peak_reserved_bytes"))
    r.measured_reserved_bytes =
        NumberIn(ranks[0], "peak_reserved_bytes", "measured/ranks[0]", source);

  r.predicted_mfu = InRange(Number(record, "estimate/mfu", source), 0, kMaxMfu, "estimate/mfu", source);
  r.measured_mfu = r.predicted_mfu * r.predicted_step_s / r.measured_step_s;
  if (r.measured_mfu > kMaxMfu)  // faster than the peak allows: the record is wrong
    throw InputError({source}, path + "/measured",
                     fmt::format("a measured step of {} s would mean an MFU of {:.3g}; expected "
                                 "at most {} (docs/limits.md)",
                                 r.measured_step_s, r.measured_mfu, kMaxMfu));
  r.measured_tokens_per_s = InRange(Number(record, "measured/tokens_per_s", source), 0,
                                    kMaxTokensPerS, "measured/tokens_per_s", source);
  return r;
}

std::string FormatSweepTable(const std::vector<SweepRow>& rows) {
  std::string out =
      "| plan | model | precision | seq | batch | step predicted (ms) | step measured (ms) | "
      "error | peak predicted (GiB) | peak measured (GiB) | reserved (GiB) | error | MFU measured "
      "(predicted) | tokens/s |\n"
      "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  std::vector<double> step_errors, memory_errors;
  for (const SweepRow& r : rows) {
    out += fmt::format(
        "| {} | {} | {} | {} | {} | {:.1f} | {:.1f} | {:+.1f}% | {:.2f} | {:.2f} | {} | {:+.1f}% | "
        "{:.1f}% ({:.1f}%) | {:.0f} |\n",
        r.name, r.model, r.precision, r.seq_len, r.global_batch, ToMs(r.predicted_step_s),
        ToMs(r.measured_step_s), r.step_error_pct, ToGiB(r.predicted_peak_bytes),
        ToGiB(r.measured_peak_bytes),
        r.measured_reserved_bytes > 0 ? fmt::format("{:.2f}", ToGiB(r.measured_reserved_bytes)) : "-",
        r.memory_error_pct, r.measured_mfu * 100, r.predicted_mfu * 100, r.measured_tokens_per_s);
    step_errors.push_back(std::abs(r.step_error_pct));
    memory_errors.push_back(std::abs(r.memory_error_pct));
  }
  out += fmt::format("\n{} plans; median |step time error| {:.1f}%, median |peak memory error| {:.1f}%",
                     rows.size(), Median(step_errors), Median(memory_errors));
  if (!rows.empty()) out += fmt::format(" (device: {}; hardware: {})", rows[0].device, rows[0].hardware);
  out += "\n";
  return out;
}

json SweepRowToJson(const SweepRow& r) {
  return json{{"name", r.name},
              {"device", r.device},
              {"hardware", r.hardware},
              {"model", r.model},
              {"plan", r.plan},
              {"precision", r.precision},
              {"seq_len", r.seq_len},
              {"global_batch", r.global_batch},
              {"predicted_step_s", r.predicted_step_s},
              {"measured_step_s", r.measured_step_s},
              {"step_error_pct", r.step_error_pct},
              {"predicted_peak_bytes", r.predicted_peak_bytes},
              {"measured_peak_bytes", r.measured_peak_bytes},
              {"measured_reserved_bytes", r.measured_reserved_bytes},
              {"memory_error_pct", r.memory_error_pct},
              {"predicted_mfu", r.predicted_mfu},
              {"measured_mfu", r.measured_mfu},
              {"measured_tokens_per_s", r.measured_tokens_per_s}};
}

}  // namespace meshplan
