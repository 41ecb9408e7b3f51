#include "planner/measure/framework_log/framework_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "planner/input_file.h"

namespace meshplan {
namespace {

LoggedRun ParseOne(LogFormat format, const std::string& text, const std::string& file,
                   const RunShape& shape) {
  switch (format) {
    case LogFormat::kMegatron: return ParseMegatronLog(text, file, shape);
    case LogFormat::kTorchtitan: return ParseTorchtitanLog(text, file, shape);
    case LogFormat::kDeepspeed: return ParseDeepspeedLog(text, file, shape);
    case LogFormat::kPytorchHook: return ParsePytorchHook(text, file, shape);
    case LogFormat::kMeshplan: break;
  }
  throw InputError({file}, "framework",
                   "meshplan's own runs are read from measured.json (meshplan compare PLAN "
                   "MEASURED.json), not as a framework log");
}

}  // namespace

RunShape RunShapeOf(const PlanFile& p) {
  return {p.training.global_batch, p.training.seq_len, p.plan.world_size()};
}

LoggedRun ReadFrameworkLogs(LogFormat format, const std::vector<std::string>& paths,
                            const RunShape& shape) {
  if (paths.empty()) throw InputError({"<command line>"}, "log", "no log file given");
  LoggedRun run;
  std::map<int64_t, std::string> rank_file;
  for (const std::string& path : paths) {
    LoggedRun one = ParseOne(format, ReadInputFile(path, "log"), path, shape);
    if (run.samples.empty()) {
      run.samples = one.samples;
      run.device = one.device;
    } else if (one.samples.size() != run.samples.size()) {
      throw InputError({path}, "log",
                       fmt::format("{} timing samples, but {} has {}: expected the logs of one "
                                   "run", one.samples.size(), paths.front(), run.samples.size()));
    } else {
      for (size_t i = 0; i < one.samples.size(); ++i)  // the slowest rank times the step
        run.samples[i].seconds = std::max(run.samples[i].seconds, one.samples[i].seconds);
    }
    for (const LoggedMemory& m : one.memory) {
      if (auto [at, fresh] = rank_file.emplace(m.rank, path); !fresh)
        throw InputError({path}, "rank", fmt::format("rank {} is reported in {} too: expected "
                                                     "each rank once", m.rank, at->second));
      run.memory.push_back(m);
    }
  }
  std::sort(run.memory.begin(), run.memory.end(),
            [](const LoggedMemory& a, const LoggedMemory& b) { return a.rank < b.rank; });
  return run;
}

std::vector<std::string> FilesOfRun(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return {path};
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec))
    if (entry.is_regular_file()) files.push_back(entry.path().string());
  if (ec) throw InputError({path}, "log", "cannot list the folder: " + ec.message());
  if (files.empty()) throw InputError({path}, "log", "an empty folder: expected one run's logs");
  std::sort(files.begin(), files.end());
  return files;
}

Measurement MeasurementOfRun(const LoggedRun& run, const PlanFile& p, int64_t warmup,
                             const std::string& source) {
  if (run.samples.size() <= static_cast<size_t>(warmup))
    throw InputError({source}, "warmup",
                     fmt::format("the log has {} timing samples and the warm-up leaves out {}: "
                                 "log more steps, or lower --warmup", run.samples.size(), warmup));
  Measurement m;
  m.environment = EnvironmentOfPlan(p);
  m.environment.device = run.device.empty()
                             ? p.cluster.gpu.name + " (assumed: the log does not name its device)"
                             : run.device;
  m.steps = static_cast<int64_t>(run.samples.size());
  m.warmup_steps = warmup;
  m.tokens_per_step = p.training.global_batch * p.training.seq_len;
  const bool losses = std::all_of(run.samples.begin(), run.samples.end(),
                                  [](const LoggedSample& s) { return s.loss >= 0; });
  for (const LoggedSample& s : run.samples) {
    m.step_times_s.push_back(s.seconds);
    if (losses) m.losses.push_back(s.loss);
  }
  m.median_step_s = MedianAfterWarmup(m.step_times_s, warmup);
  m.tokens_per_s = TokensPerSecond(m.step_times_s, warmup, m.tokens_per_step);
  for (const LoggedMemory& logged : run.memory) {
    if (logged.rank >= p.plan.world_size())
      throw InputError({source}, "rank", fmt::format("rank {} is outside the plan's {} ranks",
                                                     logged.rank, p.plan.world_size()));
    RankMeasurement r;
    r.rank = static_cast<int>(logged.rank);
    r.peak_memory_bytes = logged.max_allocated_bytes;
    r.peak_reserved_bytes = logged.max_reserved_bytes;
    m.ranks.push_back(r);
    m.peak_memory_bytes.push_back(logged.max_allocated_bytes);
  }
  return m;
}

}  // namespace meshplan
