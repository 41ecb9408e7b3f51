// Measurement: what the executor saw when it ran a plan (measured.json), and one rank's
// share of it (RankMeasurement). No LibTorch here: `meshplan compare` reads it.
//
// Each rank returns a RankMeasurement from RunRank (executor/run_rank.h); rank 0 combines
// them (CombineRankMeasurements, executor/run_rank.h) into one Measurement and writes it as
// JSON. Times are wall seconds of whole optimizer steps (batch -> forward -> backward ->
// gradient sync -> update), synchronised by the step's own collectives. Memory is the
// executor's allocator view: on CPU the c10 CPU allocator's live bytes (counted by
// executor/device/memory_probe.h), on CUDA the caching allocator's max allocated.
// Optimizer offload (offload_opt): the memory fields are the device's; the offloaded
// optimizer shard in host memory is reported apart (host_optimizer_bytes), counted from the
// tensors the offload path allocates. On a CPU rank host and device are one allocator: its
// figures (resident, peak, phase peaks) less those bytes are the "device" side.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace meshplan {

// The peak live bytes inside one phase of a step (max over the steps), to tell which
// phase sets the peak: "forward", "backward", "optimizer".
struct PhasePeak {
  std::string phase;
  int64_t peak_bytes = 0;
  bool operator==(const PhasePeak&) const = default;
};

struct RankMeasurement {
  int rank = 0;                       // world rank
  int64_t first_step = 0;             // steps done before this run (a resumed run: > 0)
  std::vector<double> step_times_s;   // every step of this run, warm-up included
  std::vector<double> losses;         // the global-batch mean loss per step (same on all ranks)
  int64_t resident_bytes = 0;         // live bytes when training starts (params, grads,
                                      // optimizer states, model buffers)
  int64_t peak_memory_bytes = 0;      // max live bytes during the steps (resident included)
  int64_t peak_reserved_bytes = 0;    // CUDA: the caching allocator's max reserved bytes
                                      // (what the process held from the driver); 0 on CPU
  std::vector<PhasePeak> phase_peaks; // per phase, max over the steps
  int64_t host_optimizer_bytes = 0;   // offload_opt: the optimizer shard in host memory
                                      // (parameter copy, Adam m, v, gradient buffer;
                                      // executor/parallel/zero_engine.h); 0 without offload.
                                      // Optional in JSON (written when > 0)
  std::string stop_reason;            // why this rank stopped before the last step ("": it
                                      // did not; optional in JSON, absent in older files)
  bool operator==(const RankMeasurement&) const = default;
};

// Where and what was run.
struct MeasurementEnvironment {
  std::string device;            // "cpu" or the CUDA device name
  std::string libtorch_version;  // e.g. "1.13.1"
  std::string hostname;
  int world_size = 1;
  int intra_op_threads = 1;      // at::get_num_threads() per rank
  std::string model;             // ModelSpec::name
  std::string plan;              // ToPlanString(plan)
  std::string precision;         // ToString(Precision)
  std::string attention;         // the attention core that ran: naive | fused ("": not
                                 // recorded, older files; compare then assumes auto)
  // The kernel PyTorch's SDPA picked for a fused core on this device: flash2 | cudnn |
  // efficient | math | other ("": no fused core, context parallelism's ring, or an older
  // file; compare then times the meshplan profile's kernel).
  std::string attention_kernel;
  std::string adamw;             // the AdamW kernel where the update ran: fused | unfused
                                 // ("": older files; compare then assumes unfused)
  int64_t global_batch = 0;      // sequences per step
  int64_t seq_len = 0;
  bool operator==(const MeasurementEnvironment&) const = default;
};

struct PlanFile;  // planner/training_setup.h

// The environment fields a plan fixes: world size, model, plan string, precision, global batch
// and sequence length (the device and the rest are the run's to fill in).
MeasurementEnvironment EnvironmentOfPlan(const PlanFile& plan_file);

struct Measurement {
  MeasurementEnvironment environment;
  int64_t first_step = 0;             // steps done before this run (resume)
  int64_t steps = 0;                  // steps run
  int64_t warmup_steps = 0;           // the first ones, left out of the timing
  int64_t tokens_per_step = 0;        // global_batch * seq_len
  std::vector<double> step_times_s;   // per step, the slowest rank's time
  double median_step_s = 0;           // median of step_times_s after warm-up
  double tokens_per_s = 0;            // tokens of the timed steps / their summed time
  std::vector<double> losses;         // per step
  std::vector<int64_t> peak_memory_bytes;  // per rank, indexed by world rank
  std::vector<RankMeasurement> ranks;      // everything each rank reported
  // Why the run stopped before its last step ("" when it did not; e.g. "step 7: the loss
  // is nan ..."): the figures above cover the steps done before. Optional in JSON (written
  // only when set; absent in older files).
  std::string stop_reason;
  // "" for a run of every rank; "zero" or "model" when the ranks ran alone with emulated
  // peers (`meshplan run --emulate-rank`, docs/executor.md#emulated-ranks), their
  // communication taking that time: then `ranks` holds only the emulated ranks (ascending
  // world ranks) and peak_memory_bytes has one entry per entry of `ranks`. Optional in JSON.
  std::string emulated_comm;
  bool operator==(const Measurement&) const = default;

  int64_t max_peak_memory_bytes() const;  // the most loaded rank
};

// The median of times[warmup..] (0 when nothing is left after the warm-up).
double MedianAfterWarmup(const std::vector<double>& times, int64_t warmup);
// tokens_per_step * timed steps / their summed seconds (0 when nothing is timed).
double TokensPerSecond(const std::vector<double>& times, int64_t warmup, int64_t tokens_per_step);

// Fills the derived fields (step_times_s as the max over ranks, median, tokens/s,
// losses from the first rank, peak per rank) from `ranks`. Throws std::invalid_argument
// when the ranks disagree on the number of steps or are not 0..n-1 in order (with
// emulated_comm set: ascending world ranks below environment.world_size).
Measurement CombineRanks(const MeasurementEnvironment& environment, int64_t warmup_steps,
                         int64_t tokens_per_step, std::vector<RankMeasurement> ranks,
                         const std::string& emulated_comm = "");

nlohmann::json RankMeasurementToJson(const RankMeasurement& rank);
nlohmann::json MeasurementToJson(const Measurement& measurement);
// Throw InputError (file = source) naming the missing or mistyped field.
RankMeasurement RankMeasurementFromJson(const nlohmann::json& json,
                                        const std::string& source = "<rank result>");
Measurement MeasurementFromJson(const nlohmann::json& json, const std::string& source);
// measured.json text (ParseJson: depth, number range and duplicate keys checked before the
// document is built), every field type- and range-checked; InputError at file:line:column
// naming the field. `source` names the text in errors.
Measurement MeasurementFromText(const std::string& text, const std::string& source);
// Reads measured.json (ReadInputFile: a regular file only), then MeasurementFromText.
Measurement LoadMeasurement(const std::string& path);

// A few lines for the terminal: steps, median step time, tokens/s, peak memory per rank,
// first and last loss.
std::string FormatMeasurementSummary(const Measurement& measurement);

}  // namespace meshplan
