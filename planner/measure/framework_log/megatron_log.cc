// Megatron-LM's log (Megatron-Core 0.20.0, NVIDIA/Megatron-LM d98e8a6; the same strings since
// Megatron-LM 2021). Two kinds of line are read:
//  * megatron/training/training.py, training_log(), printed by the last rank every
//    --log-interval iterations:
//      " iteration {:8d}/{:8d} |" ... " elapsed time per iteration (ms): {:.1f} |"
//      [" throughput per GPU (TFLOP/s/GPU): {:.1f} |"] ... [" lm loss: {:.6E} |"]
//      ... f" global batch size: {batch_size:5d} |" ...
//    The elapsed time is the mean over the iterations since the previous line.
//  * megatron/training/utils/common_utils.py, report_memory(name), printed by every rank of
//    data-parallel rank 0 after the first iterations (and every --log-memory-interval):
//      "[Rank {}] {}".format(rank, name + " memory (MB)" + " | allocated: {:.2f}"
//      + " | max allocated: {:.2f}" + " | reserved: {:.2f}" + " | max reserved: {:.2f}")
//    MB there is 1024 * 1024 bytes.
#include <fmt/format.h>

#include <map>

#include "planner/measure/framework_log/framework_log.h"
#include "planner/measure/framework_log/log_text.h"

namespace meshplan {
namespace {

constexpr const char* kIterationLine =
    "' iteration N/ M | ... elapsed time per iteration (ms): T |' (training_log, "
    "megatron/training/training.py)";

// " iteration    12/  100 |": the iteration number, or -1 when this is not such a line.
int64_t IterationOf(const LogLine& line, const std::string& file) {
  const std::string& s = line.text;
  const size_t at = s.find(" iteration ");
  if (at == std::string::npos) return -1;
  const size_t slash = s.find('/', at);
  const size_t bar = s.find('|', at);
  if (slash == std::string::npos || bar == std::string::npos || slash > bar) return -1;
  for (size_t i = at + 11; i < slash; ++i)
    if (s[i] != ' ' && !std::isdigit(static_cast<unsigned char>(s[i]))) return -1;
  return RequiredIntAfter(line, " iteration ", file, "an iteration line", "/");
}

}  // namespace

LoggedRun ParseMegatronLog(const std::string& text, const std::string& file, const RunShape& shape) {
  LoggedRun run;
  std::map<int64_t, LoggedMemory> memory;
  for (const LogLine& line : LogLines(text, file)) {
    const int64_t iteration = IterationOf(line, file);
    if (iteration >= 0) {
      LoggedSample sample;
      sample.step = iteration;
      sample.line = line.number;
      sample.seconds = RequiredNumberAfter(line, "elapsed time per iteration (ms):", file,
                                           "an iteration line", "|") / 1e3;
      if (sample.seconds <= 0)
        throw InputError({file, line.number}, "elapsed time per iteration (ms)",
                         "expected a positive time, got 0");
      if (std::optional<double> loss = NumberAfter(line, "lm loss:", file, "|")) sample.loss = *loss;
      if (std::optional<double> batch = NumberAfter(line, "global batch size:", file, "|");
          batch && shape.global_batch > 0 && *batch != static_cast<double>(shape.global_batch))
        throw InputError({file, line.number}, "global batch size",
                         fmt::format("the log's run has {:g} sequences per step, the plan {}: "
                                     "this is not a log of that plan", *batch, shape.global_batch));
      if (!run.samples.empty() && iteration <= run.samples.back().step)
        throw InputError({file, line.number}, "iteration",
                         fmt::format("iteration {} after iteration {} (line {}): expected "
                                     "increasing iterations (one run per log)",
                                     iteration, run.samples.back().step, run.samples.back().line));
      run.samples.push_back(sample);
      continue;
    }
    const size_t report = line.text.find(" memory (MB) | allocated:");
    const size_t rank_at = line.text.find("[Rank ");
    if (report == std::string::npos || rank_at == std::string::npos || rank_at > report) continue;
    const std::string what = "a memory report ('[Rank N] ... memory (MB) | allocated: A | max "
                             "allocated: B | reserved: C | max reserved: D', report_memory)";
    const LogLine from_rank{line.text.substr(rank_at), line.rank, line.number};
    const int64_t rank = RequiredIntAfter(from_rank, "[Rank ", file, what, "]");
    if (shape.world_size > 0 && rank >= shape.world_size)
      throw InputError({file, line.number}, "Rank",
                       fmt::format("rank {} is outside the plan's {} ranks", rank, shape.world_size));
    LoggedMemory& m = memory[rank];
    m.rank = rank;
    m.max_allocated_bytes = std::max(
        m.max_allocated_bytes, RequiredBytesAfter(line, "| max allocated:", kMiB, file, what, "|"));
    m.max_reserved_bytes = std::max(m.max_reserved_bytes,
                                    RequiredBytesAfter(line, "| max reserved:", kMiB, file, what));
  }
  if (run.samples.empty()) ThrowNoTimingLine(text, file, "megatron", kIterationLine);
  for (const auto& [rank, m] : memory) run.memory.push_back(m);
  return run;
}

}  // namespace meshplan
