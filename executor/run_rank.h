// RunRank: everything one rank of `meshplan run` does, and what it reports.
//
// The run orchestration (executor/launch/run_job.cc) builds the device mesh and calls RunRank
// on every rank with its DeviceMesh; RunRank installs the memory probe, builds the trainer
// (executor/trainer.h), optionally resumes from a snapshot, runs the steps with timing and
// memory figures, saves snapshots, and returns this rank's RankMeasurement. Rank 0 then
// combines every rank's result with CombineRankMeasurements into measured.json.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "executor/parallel/device_mesh.h"
#include "planner/config/config_loader.h"
#include "planner/executor_support.h"
#include "planner/measure/measurement.h"

namespace meshplan {

class Trainer;

struct RunOptions {
  int64_t steps = 10;          // the step count to reach (a resumed run does the rest)
  int64_t warmup_steps = 2;    // first steps of this run left out of the timing
  std::string data = "synthetic";   // "synthetic" or a token file path
  std::string data_dtype = "uint16";  // token file ids: uint16 | uint32
  int64_t save_every = 0;      // snapshot every K steps (0: never) into snapshot_dir
  std::string snapshot_dir;
  std::string resume_dir;      // resume from DIR/latest ("" : start from the seed)
  uint64_t seed = 1234;        // initialisation and synthetic data
  // Where this rank trains (executor/device/training_device.h ChooseTrainingDevice).
  at::Device device = at::kCPU;
  // Called after each step with its 1-based number (tests: fail at a step).
  std::function<void(int64_t step)> after_step;
  // Tests: called after each step with the trainer (to break its state on purpose).
  std::function<void(int64_t step, Trainer& trainer)> tamper;
  // Called at each milestone, the same sequence on every rank: the state ready (restored
  // or fresh), then each step's start and end (executor/launch/rank_status.h).
  std::function<void()> milestone;
};


// One rank. mesh.plan() must equal plan_file.plan (std::invalid_argument otherwise); bad
// options (data file, snapshot) throw InputError; communication failures std::runtime_error.
// A loss that is not finite (NaN, inf) stops training at the step it appears on every rank
// (the logged loss is the same on all of them): the result then holds the steps done
// before it and stop_reason says which step, and on this rank which micro-batch, if any.
RankMeasurement RunRank(const PlanFile& plan_file, const RunOptions& options,
                        const DeviceMesh& mesh);

// The environment of this process (device, attention core, LibTorch version, host,
// threads) and the plan.
MeasurementEnvironment CurrentEnvironment(const PlanFile& plan_file, const at::Device& device);
// Rank 0: every rank's result (in world-rank order) -> measured.json's content. When the
// ranks stopped early, stop_reason says why, naming the ranks and micro-batches where the
// loss first was not finite.
Measurement CombineRankMeasurements(const PlanFile& plan_file, const RunOptions& options,
                                    const std::vector<RankMeasurement>& ranks);

}  // namespace meshplan
