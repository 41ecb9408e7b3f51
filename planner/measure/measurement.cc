// measured.json: combining the ranks' results, JSON in and out, the terminal summary.
#include "planner/measure/measurement.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <stdexcept>

#include "planner/input_error.h"
#include "planner/input_file.h"
#include "planner/json_input.h"
#include "planner/limits.h"
#include "planner/names.h"
#include "planner/training_setup.h"
#include "planner/units_format.h"

namespace meshplan {

using nlohmann::json;

int64_t Measurement::max_peak_memory_bytes() const {
  int64_t peak = 0;
  for (int64_t bytes : peak_memory_bytes) peak = std::max(peak, bytes);
  return peak;
}

double MedianAfterWarmup(const std::vector<double>& times, int64_t warmup) {
  if (warmup < 0 || static_cast<size_t>(warmup) >= times.size()) return 0;
  std::vector<double> timed(times.begin() + warmup, times.end());
  std::sort(timed.begin(), timed.end());
  const size_t n = timed.size();
  return n % 2 == 1 ? timed[n / 2] : 0.5 * (timed[n / 2 - 1] + timed[n / 2]);
}

double TokensPerSecond(const std::vector<double>& times, int64_t warmup, int64_t tokens_per_step) {
  if (warmup < 0 || static_cast<size_t>(warmup) >= times.size()) return 0;
  double seconds = 0;
  for (size_t i = static_cast<size_t>(warmup); i < times.size(); ++i) seconds += times[i];
  const double steps = static_cast<double>(times.size() - static_cast<size_t>(warmup));
  return seconds > 0 ? static_cast<double>(tokens_per_step) * steps / seconds : 0;
}

Measurement CombineRanks(const MeasurementEnvironment& environment, int64_t warmup_steps,
                         int64_t tokens_per_step, std::vector<RankMeasurement> ranks,
                         const std::string& emulated_comm) {
  if (ranks.empty()) throw std::invalid_argument("CombineRanks: no rank results");
  Measurement m;
  m.environment = environment;
  m.emulated_comm = emulated_comm;
  const bool emulated = !emulated_comm.empty();
  m.first_step = ranks[0].first_step;
  m.steps = static_cast<int64_t>(ranks[0].step_times_s.size());
  m.warmup_steps = warmup_steps;
  m.tokens_per_step = tokens_per_step;
  m.step_times_s.assign(static_cast<size_t>(m.steps), 0.0);
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankMeasurement& rank = ranks[r];
    const bool in_order = emulated ? (rank.rank < environment.world_size &&
                                      (r == 0 ? rank.rank >= 0 : rank.rank > ranks[r - 1].rank))
                                   : rank.rank == static_cast<int>(r);
    if (!in_order)
      throw std::invalid_argument(fmt::format("CombineRanks: result {} is rank {}", r, rank.rank));
    if (static_cast<int64_t>(rank.step_times_s.size()) != m.steps ||
        static_cast<int64_t>(rank.losses.size()) != m.steps || rank.first_step != m.first_step)
      throw std::invalid_argument(fmt::format(
          "CombineRanks: rank {} ran {} steps from step {}, rank 0 ran {} from step {}", r,
          rank.step_times_s.size(), rank.first_step, m.steps, m.first_step));
    for (size_t s = 0; s < rank.step_times_s.size(); ++s)
      m.step_times_s[s] = std::max(m.step_times_s[s], rank.step_times_s[s]);
    m.peak_memory_bytes.push_back(rank.peak_memory_bytes);
  }
  m.median_step_s = MedianAfterWarmup(m.step_times_s, warmup_steps);
  m.tokens_per_s = TokensPerSecond(m.step_times_s, warmup_steps, tokens_per_step);
  m.losses = ranks[0].losses;
  m.ranks = std::move(ranks);
  return m;
}

// ---------------------------------------------------------------------------------------
// JSON

namespace {

// A list (not an object) so the phases keep their order (forward, backward, optimizer).
json PhasePeaksToJson(const std::vector<PhasePeak>& peaks) {
  json out = json::array();
  for (const PhasePeak& p : peaks) out.push_back({{"phase", p.phase}, {"peak_bytes", p.peak_bytes}});
  return out;
}

// Typed reads that name the field on failure. Strict: an integer field takes only a JSON
// integer that fits its type (2.5 and 1e30 are refused, not truncated), a number field any
// JSON number, a list only elements of its type.
class Reader {
 public:
  Reader(const json& j, std::string source, std::string prefix)
      : j_(j), source_(std::move(source)), prefix_(std::move(prefix)) {
    if (!j_.is_object()) Fail("", "expected a JSON object, got " + Show(j_));
  }
  template <typename T>
  T Get(const std::string& key) const {
    return Convert<T>(At(key), key);
  }
  // Fields added later (older measured.json files lack them): `fallback` when missing.
  template <typename T>
  T GetOr(const std::string& key, T fallback) const {
    return j_.contains(key) ? Get<T>(key) : fallback;
  }
  // An integer field that must be >= `min` (counts, bytes, sizes).
  template <typename T>
  T AtLeast(const std::string& key, T min) const {
    const T value = Get<T>(key);
    if (value < min)
      Fail(key, fmt::format("value {} is out of range; expected an integer >= {}", value, min));
    return value;
  }
  // A number in [min, max] (a physical quantity: planner/limits.h), or exactly 0 when
  // `zero_allowed` (no step was measured).
  double Quantity(const std::string& key, double min, double max, bool zero_allowed) const {
    const double value = Get<double>(key);
    if ((value == 0 && zero_allowed) || (value >= min && value <= max)) return value;
    Fail(key, fmt::format("value {} is out of range; expected {}a number from {:g} to {:g} "
                          "(docs/limits.md)", value, zero_allowed ? "0 or " : "", min, max));
  }
  // Step times: each in [kMinStepTimeS, kMaxStepTimeS].
  std::vector<double> StepTimes(const std::string& key) const {
    std::vector<double> values = Get<std::vector<double>>(key);
    for (size_t i = 0; i < values.size(); ++i)
      if (!(values[i] >= kMinStepTimeS && values[i] <= kMaxStepTimeS))
        throw InputError({source_}, fmt::format("{}{}[{}]", prefix_, key, i),
                         fmt::format("value {} is out of range; expected a step time from {:g} "
                                     "to {:g} s (docs/limits.md)",
                                     values[i], kMinStepTimeS, kMaxStepTimeS));
    return values;
  }
  // A list of numbers, each >= 0 (times, bytes).
  template <typename T>
  std::vector<T> NonNegativeList(const std::string& key) const {
    std::vector<T> values = Get<std::vector<T>>(key);
    for (size_t i = 0; i < values.size(); ++i)
      if (values[i] < 0)
        throw InputError({source_}, fmt::format("{}{}[{}]", prefix_, key, i),
                         fmt::format("value {} is negative; expected a number >= 0", values[i]));
    return values;
  }
  bool Has(const std::string& key) const { return j_.contains(key); }
  const json& At(const std::string& key) const {
    if (!j_.contains(key)) Fail(key, "missing required field");
    return j_.at(key);
  }
  [[noreturn]] void Fail(const std::string& key, const std::string& message) const {
    const std::string field = key.empty() && !prefix_.empty() && prefix_.back() == '.'
                                  ? prefix_.substr(0, prefix_.size() - 1)
                                  : prefix_ + key;
    throw InputError({source_}, field, message);
  }
  const std::string& source() const { return source_; }
  const std::string& prefix() const { return prefix_; }

 private:
  // A value for a message: at most 60 characters of its JSON.
  static std::string Show(const json& v) {
    const std::string text = v.dump();
    return text.size() <= 60 ? text : text.substr(0, 57) + "...";
  }

  template <typename T>
  T Convert(const json& v, const std::string& key) const {
    if constexpr (std::is_same_v<T, std::string>) {
      if (!v.is_string()) Fail(key, "expected a string, got " + Show(v));
      return v.get<std::string>();
    } else if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_boolean()) Fail(key, "expected true or false, got " + Show(v));
      return v.get<bool>();
    } else if constexpr (std::is_integral_v<T>) {
      using Limits = std::numeric_limits<T>;
      const std::optional<int64_t> value = JsonInt64(v);
      if (!value || *value < Limits::min() || *value > Limits::max())
        Fail(key, fmt::format("expected an integer from {} to {}, got {}", Limits::min(),
                              Limits::max(), Show(v)));
      return static_cast<T>(*value);
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!v.is_number()) Fail(key, "expected a number, got " + Show(v));
      return v.get<T>();  // finite: ParseJson refuses numbers out of double range
    } else {  // std::vector<E>
      using E = typename T::value_type;
      if (!v.is_array()) Fail(key, "expected a list, got " + Show(v));
      T out;
      out.reserve(v.size());
      for (size_t i = 0; i < v.size(); ++i)
        out.push_back(Convert<E>(v[i], fmt::format("{}[{}]", key, i)));
      return out;
    }
  }

  const json& j_;
  std::string source_, prefix_;
};

}  // namespace

json RankMeasurementToJson(const RankMeasurement& r) {
  json out{{"rank", r.rank},
           {"first_step", r.first_step},
           {"step_times_s", r.step_times_s},
           {"losses", r.losses},
           {"resident_bytes", r.resident_bytes},
           {"peak_memory_bytes", r.peak_memory_bytes},
           {"peak_reserved_bytes", r.peak_reserved_bytes},
           {"phase_peaks", PhasePeaksToJson(r.phase_peaks)}};
  if (r.host_optimizer_bytes > 0) out["host_optimizer_bytes"] = r.host_optimizer_bytes;
  if (!r.stop_reason.empty()) out["stop_reason"] = r.stop_reason;
  return out;
}

json MeasurementToJson(const Measurement& m) {
  const MeasurementEnvironment& e = m.environment;
  json ranks = json::array();
  for (const RankMeasurement& r : m.ranks) ranks.push_back(RankMeasurementToJson(r));
  json out{{"environment",
               {{"device", e.device},
                {"libtorch_version", e.libtorch_version},
                {"hostname", e.hostname},
                {"world_size", e.world_size},
                {"intra_op_threads", e.intra_op_threads},
                {"model", e.model},
                {"plan", e.plan},
                {"precision", e.precision},
                {"attention", e.attention},
                {"attention_kernel", e.attention_kernel},
                {"adamw", e.adamw},
                {"global_batch", e.global_batch},
                {"seq_len", e.seq_len}}},
              {"first_step", m.first_step},
              {"steps", m.steps},
              {"warmup_steps", m.warmup_steps},
              {"tokens_per_step", m.tokens_per_step},
              {"step_times_s", m.step_times_s},
              {"median_step_s", m.median_step_s},
              {"tokens_per_s", m.tokens_per_s},
              {"losses", m.losses},
              {"peak_memory_bytes", m.peak_memory_bytes},
              {"ranks", ranks}};
  if (!m.stop_reason.empty()) out["stop_reason"] = m.stop_reason;
  if (!m.emulated_comm.empty()) out["emulated_comm"] = m.emulated_comm;
  return out;
}

namespace {

RankMeasurement RankFromReader(const Reader& in) {
  RankMeasurement r;
  r.rank = in.AtLeast<int>("rank", 0);
  r.first_step = in.AtLeast<int64_t>("first_step", 0);
  r.step_times_s = in.StepTimes("step_times_s");
  r.losses = in.Get<std::vector<double>>("losses");
  r.resident_bytes = in.AtLeast<int64_t>("resident_bytes", 0);
  r.peak_memory_bytes = in.AtLeast<int64_t>("peak_memory_bytes", 0);
  r.peak_reserved_bytes = in.Has("peak_reserved_bytes")
                              ? in.AtLeast<int64_t>("peak_reserved_bytes", 0)
                              : 0;
  r.host_optimizer_bytes =
      in.Has("host_optimizer_bytes") ? in.AtLeast<int64_t>("host_optimizer_bytes", 0) : 0;
  r.stop_reason = in.GetOr<std::string>("stop_reason", "");
  const json& phases = in.At("phase_peaks");
  if (!phases.is_array()) in.Fail("phase_peaks", "expected a list of {phase, peak_bytes}");
  for (size_t i = 0; i < phases.size(); ++i) {
    const Reader p(phases[i], in.source(), in.prefix() + fmt::format("phase_peaks[{}].", i));
    r.phase_peaks.push_back({p.Get<std::string>("phase"), p.AtLeast<int64_t>("peak_bytes", 0)});
  }
  return r;
}

}  // namespace

RankMeasurement RankMeasurementFromJson(const json& j, const std::string& source) {
  return RankFromReader(Reader(j, source, ""));
}

Measurement MeasurementFromJson(const json& j, const std::string& source) {
  const Reader in(j, source, "");
  Measurement m;
  const Reader env(in.At("environment"), source, "environment.");
  MeasurementEnvironment& e = m.environment;
  e.device = env.Get<std::string>("device");
  e.libtorch_version = env.Get<std::string>("libtorch_version");
  e.hostname = env.Get<std::string>("hostname");
  e.world_size = env.AtLeast<int>("world_size", 1);
  if (e.world_size > kMaxGpus)
    env.Fail("world_size", fmt::format("value {} is out of range; expected at most {} (kMaxGpus, "
                                       "docs/limits.md)", e.world_size, kMaxGpus));
  e.intra_op_threads = env.Get<int>("intra_op_threads");
  e.model = env.Get<std::string>("model");
  e.plan = env.Get<std::string>("plan");
  e.precision = env.Get<std::string>("precision");
  e.attention = env.GetOr<std::string>("attention", "");
  e.attention_kernel = env.GetOr<std::string>("attention_kernel", "");
  e.adamw = env.GetOr<std::string>("adamw", "");
  e.global_batch = env.AtLeast<int64_t>("global_batch", 0);
  e.seq_len = env.AtLeast<int64_t>("seq_len", 0);
  m.first_step = in.AtLeast<int64_t>("first_step", 0);
  m.steps = in.AtLeast<int64_t>("steps", 0);
  m.warmup_steps = in.AtLeast<int64_t>("warmup_steps", 0);
  m.tokens_per_step = in.AtLeast<int64_t>("tokens_per_step", 0);
  m.step_times_s = in.StepTimes("step_times_s");
  // 0 only when no step past the warm-up was measured (MedianAfterWarmup, TokensPerSecond).
  const bool none_measured = m.step_times_s.size() <= static_cast<size_t>(m.warmup_steps);
  m.median_step_s = in.Quantity("median_step_s", kMinStepTimeS, kMaxStepTimeS, none_measured);
  m.tokens_per_s = in.Quantity("tokens_per_s", kMinTokensPerS, kMaxTokensPerS, none_measured);
  m.losses = in.Get<std::vector<double>>("losses");
  m.peak_memory_bytes = in.NonNegativeList<int64_t>("peak_memory_bytes");
  m.stop_reason = in.GetOr<std::string>("stop_reason", "");
  const json& ranks = in.At("ranks");
  if (!ranks.is_array()) in.Fail("ranks", "expected a list of rank results");
  for (size_t i = 0; i < ranks.size(); ++i)
    m.ranks.push_back(RankFromReader(Reader(ranks[i], source, fmt::format("ranks[{}].", i))));
  m.emulated_comm = in.GetOr<std::string>("emulated_comm", "");
  if (m.emulated_comm.empty()) {
    if (static_cast<int>(m.peak_memory_bytes.size()) != e.world_size)
      in.Fail("peak_memory_bytes", fmt::format("expected {} entries (environment.world_size), got {}",
                                               e.world_size, m.peak_memory_bytes.size()));
    return m;
  }
  if (m.emulated_comm != "zero" && m.emulated_comm != "model")
    in.Fail("emulated_comm", "expected zero or model (or no field: every rank ran), got '" +
                                 m.emulated_comm + "'");
  if (m.peak_memory_bytes.size() != m.ranks.size())
    in.Fail("peak_memory_bytes", fmt::format("expected {} entries (one per emulated rank), got {}",
                                             m.ranks.size(), m.peak_memory_bytes.size()));
  for (size_t i = 0; i < m.ranks.size(); ++i)
    if (m.ranks[i].rank >= e.world_size || (i > 0 && m.ranks[i].rank <= m.ranks[i - 1].rank))
      in.Fail(fmt::format("ranks[{}].rank", i),
              fmt::format("value {} is out of order; expected ascending world ranks below {}",
                          m.ranks[i].rank, e.world_size));
  return m;
}

Measurement MeasurementFromText(const std::string& text, const std::string& source) {
  try {
    return MeasurementFromJson(ParseJson(text, source), source);
  } catch (const InputError& e) {
    throw LocatedInJson(e, text);  // a field's error gets the line and column of its value
  }
}

Measurement LoadMeasurement(const std::string& path) {
  return MeasurementFromText(ReadInputFile(path, "measurement"), path);
}

std::string FormatMeasurementSummary(const Measurement& m) {
  std::string out;
  if (m.emulated_comm.empty()) {
    out = fmt::format(
        "measured {} steps of {} ({}) on {} rank(s), {}: median step {:.4f} s, {:.1f} tokens/s\n",
        m.steps, m.environment.model, m.environment.plan, m.environment.world_size,
        m.environment.device, m.median_step_s, m.tokens_per_s);
  } else {
    // An emulated run measured its ranks' compute and memory, nothing of the plan's whole step
    // (no peer waits, no pipeline bubble): no tokens/s, and the time says what it holds.
    const bool modelled = m.emulated_comm == "model";
    out = fmt::format(
        "emulated {} steps of {} ({}), {}: {} of {} rank(s) ran one at a time, peers emulated\n"
        "  measured: each rank's compute and peak memory; median step {:.4f} s: {}\n"
        "  not measured: the plan's step and tokens/s (no peer is waited for, no pipeline "
        "bubble); losses are not the model's\n",
        m.steps, m.environment.model, m.environment.plan, m.environment.device, m.ranks.size(),
        m.environment.world_size, m.median_step_s,
        modelled ? "measured compute + modelled communication (communication: model)"
                 : "measured compute alone (communication: zero)");
  }
  for (size_t i = 0; i < m.peak_memory_bytes.size(); ++i)
    out += fmt::format("  rank {}: peak memory {}{}\n",
                       i < m.ranks.size() ? m.ranks[i].rank : static_cast<int>(i),
                       FormatMiB(static_cast<double>(m.peak_memory_bytes[i]), 3),
                       i < m.ranks.size() && m.ranks[i].host_optimizer_bytes > 0
                           ? ", host (offloaded optimizer) " +
                                 FormatMiB(static_cast<double>(m.ranks[i].host_optimizer_bytes), 3)
                           : "");
  if (!m.losses.empty())
    out += fmt::format("  loss: step {} {:.4f} -> step {} {:.4f}\n", m.first_step + 1,
                       m.losses.front(), m.first_step + m.steps, m.losses.back());
  if (!m.stop_reason.empty()) out += "  stopped early: " + m.stop_reason + "\n";
  return out;
}

MeasurementEnvironment EnvironmentOfPlan(const PlanFile& p) {
  MeasurementEnvironment e;
  e.world_size = static_cast<int>(p.plan.world_size());
  e.model = p.model.name;
  e.plan = ToPlanString(p.plan);
  e.precision = ToString(p.training.precision);
  e.global_batch = p.training.global_batch;
  e.seq_len = p.training.seq_len;
  return e;
}

}  // namespace meshplan
