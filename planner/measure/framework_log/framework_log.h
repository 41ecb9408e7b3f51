// Reading a training framework's own log back as a Measurement (planner/measure/measurement.h),
// so that `meshplan compare --log` and `calibrate --from-logs` treat a Megatron-LM, torchtitan,
// DeepSpeed or plain-PyTorch run as they treat meshplan's own.
//
// One parser per format (FrameworkSpec::log_format), each following the format string in the
// framework's source that its file cites; docs/framework_logs.md lists them with the sources.
// A parser returns a LoggedRun: the timing samples in log order (one per timing line: the
// framework's average over the steps since its previous line) and each reporting rank's memory
// peaks. MeasurementOfRun makes a Measurement of a plan from it: step_times_s are the samples,
// warmup_steps the first samples left out (their median is median_step_s), and `ranks` holds the
// ranks the log reports (not every rank: Megatron-LM prints memory on data-parallel rank 0 only).
// Errors (InputError, exit 2) name the file, the line and what was expected: binary data, a
// truncated timing line, NaN, infinite or negative figures, no timing line at all (naming the
// format the text looks like when it is another framework's), a figure that contradicts the plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/config/config_loader.h"
#include "planner/framework_spec.h"
#include "planner/measure/measurement.h"

namespace meshplan {

// What the plan says about a run that the logs leave out (torchtitan and DeepSpeed log rates,
// which become step times through it).
struct RunShape {
  int64_t global_batch = 0;  // sequences per step
  int64_t seq_len = 0;
  int64_t world_size = 1;
};

struct LoggedSample {
  int64_t step = 0;      // the framework's step / iteration number
  double seconds = 0;    // per step
  double loss = -1;      // < 0: not logged
  int line = 0;          // 1-based, in its file
};

// The peaks a rank reported (max over its reports); 0: not reported.
struct LoggedMemory {
  int64_t rank = 0;
  int64_t max_allocated_bytes = 0;
  int64_t max_reserved_bytes = 0;
};

struct LoggedRun {
  std::string device;                 // "" when the log does not name it
  std::vector<LoggedSample> samples;  // in log order, steps increasing
  std::vector<LoggedMemory> memory;   // ascending ranks
};

// The parsers: `text` is one file's content, `file` names it in errors.
LoggedRun ParseMegatronLog(const std::string& text, const std::string& file, const RunShape& shape);
LoggedRun ParseTorchtitanLog(const std::string& text, const std::string& file, const RunShape& shape);
LoggedRun ParseDeepspeedLog(const std::string& text, const std::string& file, const RunShape& shape);
// One rank's JSON of the plain-PyTorch hook (docs/framework_logs.md "The PyTorch hook").
LoggedRun ParsePytorchHook(const std::string& text, const std::string& file, const RunShape& shape);

// Reads the files (ReadInputFile) and parses them in `format` (not kMeshplan: measured.json is
// LoadMeasurement's). Several files are one run's logs (the PyTorch hook writes one per rank):
// their memory is merged, and their samples must agree in number (the slowest rank's time per
// sample is kept, as CombineRanks does). A rank reported twice is an InputError.
LoggedRun ReadFrameworkLogs(LogFormat format, const std::vector<std::string>& paths,
                            const RunShape& shape);

// The files of one run named on a command line: the file itself, or a folder's regular files,
// sorted (the PyTorch hook's JSON per rank). InputError for an empty or unreadable folder.
std::vector<std::string> FilesOfRun(const std::string& path);

// The Measurement of `plan_file`'s run that `run` logged: the environment is the plan's (the
// device the log's, else the plan's GPU, marked "assumed"); `warmup` samples are left out of
// the median. InputError (file = source) when no sample is left after the warm-up, or a rank
// is outside the plan.
Measurement MeasurementOfRun(const LoggedRun& run, const PlanFile& plan_file, int64_t warmup,
                             const std::string& source);

// The RunShape of a plan.
RunShape RunShapeOf(const PlanFile& plan_file);

}  // namespace meshplan
