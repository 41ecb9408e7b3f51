// DeepSpeed's log (DeepSpeed 0.19.6, deepspeedai/DeepSpeed edaa722): the line of
// deepspeed/utils/timer.py, ThroughputTimer.stop(), printed through the DeepSpeed logger
// ("[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s] %(message)s",
// deepspeed/utils/logging.py) every steps_per_print optimizer steps, when the config sets
// "steps_per_print" (STEPS_PER_PRINT_DEFAULT is None: a default run prints no timing):
//   "epoch={}/micro_step={}/global_step={}, RunningAvgSamplesPerSec={}, CurrSamplesPerSec={}, "
//   "MemAllocated={}GB, MaxMemAllocated={}GB".format(epoch_count, micro_step_count,
//   global_step_count, avg_samples_per_sec(), batch_size / step_elapsed_time,
//   round(memory_allocated() / 1024**3, 2), round(max_memory_allocated() / 1024**3, 2))
// batch_size is the engine's train_batch_size() (the global batch), so one step takes
// global_batch / CurrSamplesPerSec seconds (the last step before the line). Lines without
// torchrun's "[rankN]:" prefix are rank 0's; a step logged twice without a prefix is the lines
// of several ranks mixed, which cannot be told apart, and is refused.
#include <algorithm>

#include "planner/measure/framework_log/framework_log.h"
#include "planner/measure/framework_log/log_text.h"

namespace meshplan {

LoggedRun ParseDeepspeedLog(const std::string& text, const std::string& file, const RunShape& shape) {
  const std::string what = "a throughput line ('epoch=E/micro_step=M/global_step=G, "
                           "RunningAvgSamplesPerSec=R, CurrSamplesPerSec=C, MemAllocated=AGB, "
                           "MaxMemAllocated=BGB', ThroughputTimer.stop)";
  RankedSamples ranks;
  for (const LogLine& line : LogLines(text, file)) {
    if (line.text.find("/global_step=") == std::string::npos) continue;
    LoggedSample sample;
    sample.step = RequiredIntAfter(line, "/global_step=", file, what, ",");
    sample.line = line.number;
    const double samples_per_s = RequiredNumberAfter(line, "CurrSamplesPerSec=", file, what, ",");
    if (samples_per_s <= 0)
      throw InputError({file, line.number}, "CurrSamplesPerSec", "expected a positive rate, got 0");
    sample.seconds = static_cast<double>(shape.global_batch) / samples_per_s;
    const int64_t max_allocated = RequiredBytesAfter(line, "MaxMemAllocated=", kGiB, file, what, "GB");
    LoggedMemory& m = ranks.Add(line, sample, file, "global_step");
    m.max_allocated_bytes = std::max(m.max_allocated_bytes, max_allocated);
  }
  if (ranks.empty())
    ThrowNoTimingLine(text, file, "deepspeed",
                      "'epoch=E/micro_step=M/global_step=G, ... CurrSamplesPerSec=C, ...' "
                      "(ThroughputTimer.stop, deepspeed/utils/timer.py; set steps_per_print)");
  return ranks.Run();
}

}  // namespace meshplan
