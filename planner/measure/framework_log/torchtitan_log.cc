// torchtitan's log (torchtitan 0.2.2, pytorch/torchtitan b5bcd76): the step line of
// torchtitan/components/metrics.py, MetricsProcessor.log(), printed every
// --metrics.log_freq steps (and at step 1) through the "[titan] %(asctime)s - %(name)s -
// %(levelname)s - %(message)s" formatter of torchtitan/tools/logging.py:
//   f"{color.red}step: {step:2}  "
//   f"{color.green}loss: {global_avg_loss:8.5f}  "
//   f"{color.orange}grad_norm: {grad_norm:7.4f}  "
//   f"{color.turquoise}memory: {device_mem_stats.max_reserved_gib:5.2f}GiB"
//   f"({device_mem_stats.max_reserved_pct:.2f}%)  "
//   f"{color.blue}tps: {round(tps):,}  "
//   f"{color.cyan}tflops: {tflops:,.2f}  "
//   f"{color.magenta}mfu: {mfu_str}{color.reset}"
// (colours are ANSI escapes, or "" with --metrics.disable_color_printing). tps is tokens per
// second per device over the steps since the previous line (ntokens_since_last_log /
// (time_delta * non_data_parallel_size)), so one step of the whole run takes
// global_batch * seq_len / (tps * world_size) seconds. memory is the peak reserved GiB
// (torch.cuda.memory_stats()["reserved_bytes.all.peak"] / 2^30) since the previous line.
// Only the ranks run_train.sh's LOG_RANK lets through print; torchrun's "[rankN]:" prefix
// says which (none: rank 0). Earlier versions print fewer fields, read alike: before
// 4e3266374 (2025-02) no tflops, the line ending "tps: T  mfu: U%" (train.py at 9dec370ad,
// December 2024, without grad_norm), and before 4d182a13e (2024-11) the same figure named
// wps, "wps: W  mfu: U%" (train.py at 157a12c56, April 2024).
#include <algorithm>

#include "planner/measure/framework_log/framework_log.h"
#include "planner/measure/framework_log/log_text.h"

namespace meshplan {

LoggedRun ParseTorchtitanLog(const std::string& text, const std::string& file, const RunShape& shape) {
  const std::string what = "a step line ('step: N  loss: L  grad_norm: G  memory: M GiB(P%)  "
                           "tps: T  tflops: F  mfu: U%', MetricsProcessor.log; or an earlier "
                           "version's, without grad_norm and tflops, or with wps for tps)";
  RankedSamples ranks;
  for (const LogLine& line : LogLines(text, file)) {
    const size_t at = line.text.find("step: ");
    if (at == std::string::npos || line.text.find("validate") != std::string::npos) continue;
    if (at > 0 && line.text[at - 1] != ' ' && line.text[at - 1] != '-') continue;
    LoggedSample sample;
    sample.step = RequiredIntAfter(line, "step: ", file, what);
    sample.line = line.number;
    sample.loss = RequiredNumberAfter(line, "loss: ", file, what);
    // The tokens/s figure (wps before 2024-11) and the field after it (tflops from 2025-02).
    const std::string_view label =
        line.text.find("wps: ") != std::string::npos && line.text.find("tps: ") == std::string::npos
            ? "wps: " : "tps: ";
    const std::string_view then =
        line.text.find("tflops: ") != std::string::npos ? "tflops:" : "mfu:";
    const double tps = RequiredNumberAfter(line, label, file, what, then, true);
    if (tps <= 0)
      throw InputError({file, line.number}, "tps", "expected a positive tokens/s per device, got 0");
    sample.seconds = static_cast<double>(shape.global_batch * shape.seq_len) /
                     (tps * static_cast<double>(shape.world_size));
    const int64_t reserved = RequiredBytesAfter(line, "memory: ", kGiB, file, what, "GiB");
    LoggedMemory& m = ranks.Add(line, sample, file, "step");
    m.max_reserved_bytes = std::max(m.max_reserved_bytes, reserved);
  }
  if (ranks.empty())
    ThrowNoTimingLine(text, file, "torchtitan",
                      "'step: N  loss: L  ...  tps: T  tflops: F  mfu: U%' (MetricsProcessor.log, "
                      "torchtitan/components/metrics.py)");
  return ranks.Run();
}

}  // namespace meshplan
