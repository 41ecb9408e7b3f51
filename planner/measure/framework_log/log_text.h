// The pieces every text-log parser shares (planner/measure/framework_log/framework_log.h):
// splitting a log into checked lines, removing what launchers and colours add to a line, and
// reading the figure that follows a label with the range checks every figure needs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <map>

#include "planner/input_error.h"
#include "planner/measure/framework_log/framework_log.h"

namespace meshplan {

// The units the frameworks print memory in: PyTorch's 1024-based MB and GB.
inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGiB = kMiB * 1024.0;

// One line of a log, cleaned: ANSI colour escapes (ESC [ ... m, torchtitan's Color) removed,
// and torchrun's "[rankN]:" prefix (--tee with --role rank) taken off into `rank` (-1: none).
struct LogLine {
  std::string text;
  int64_t rank = -1;
  int number = 0;  // 1-based
};

// The text's lines, cleaned. InputError at file:line when the text is not a text log: a NUL
// or another control byte (but tab, carriage return and the ESC of colour codes).
std::vector<LogLine> LogLines(const std::string& text, const std::string& file);

// The number that follows `label` in `line` (spaces skipped), e.g. the 12.5 of
// "elapsed time per iteration (ms): 12.5 |". nullopt when the label is absent. InputError at
// the line when the label is there but no finite, non-negative number follows, or (with
// `then`) the number is not followed by `then` (a line cut short). `commas`: thousands
// separators allowed ("12,345", torchtitan's tps).
std::optional<double> NumberAfter(const LogLine& line, std::string_view label,
                                  const std::string& file, std::string_view then = "",
                                  bool commas = false);
// The same, required: InputError naming `label` and `what` when it is absent.
double RequiredNumberAfter(const LogLine& line, std::string_view label, const std::string& file,
                           const std::string& what, std::string_view then = "", bool commas = false);
// A required number that must also be a whole number (a step, a rank).
int64_t RequiredIntAfter(const LogLine& line, std::string_view label, const std::string& file,
                         const std::string& what, std::string_view then = "");
// A required memory figure printed in units of `unit_bytes` (kMiB, kGiB), in bytes. InputError
// at the line when it is 1 EiB or more (no device has that; it would not fit in int64 bytes).
int64_t RequiredBytesAfter(const LogLine& line, std::string_view label, double unit_bytes,
                           const std::string& file, const std::string& what,
                           std::string_view then = "");

// The timing lines and memory peaks of a log whose lines several ranks may print (torchrun's
// "[rankN]:" prefix; none: rank 0). The lowest rank that printed timing lines times the run.
class RankedSamples {
 public:
  // Adds `line`'s sample under its rank (no prefix: rank 0) and returns that rank's peaks, to
  // raise with what the line reports. InputError at the sample's line, naming `field`, when its
  // step does not follow the rank's previous one (a rank's lines of two runs, or several
  // ranks' lines without the prefix).
  LoggedMemory& Add(const LogLine& line, const LoggedSample& sample, const std::string& file,
                    const std::string& field);
  bool empty() const { return samples_.empty(); }
  LoggedRun Run() const;

 private:
  std::map<int64_t, std::vector<LoggedSample>> samples_;
  std::map<int64_t, LoggedMemory> memory_;
};

// The name of the log format `text` looks like ("megatron", "torchtitan", "deepspeed",
// "pytorch-hook", "meshplan"), "" when none: for "no timing line" errors.
std::string GuessLogFormat(const std::string& text);

// The InputError a parser throws when `file` has no timing line: names what was expected
// (`expected`, the format string) and, when the text looks like another format, that one.
[[noreturn]] void ThrowNoTimingLine(const std::string& text, const std::string& file,
                                    const std::string& format, const std::string& expected);

}  // namespace meshplan
