// Sweep records -> the README table of predicted vs measured (`meshplan measurements`).
//
// A sweep record (docs/measurements/<gpu>/<name>.json, written by scripts/gpu_sweep.sh
// for each plan it runs) is one JSON object:
//   "record":      "meshplan sweep v1"
//   "name":        the plan's short name ("l1b-mixed-s2048-mbs4-none")
//   "commands":    the exact commands that produced it (run, estimate, compare)
//   "estimate":    `meshplan estimate --plan-file P --format json`
//   "measured":    the measured.json `meshplan run` wrote
//   "comparison":  `meshplan compare P measured.json --format json`
// SweepRowFromJson reads the figures a table row shows from it; measured MFU is the
// predicted MFU scaled by predicted / measured step time (same FLOPs, same peak).
// Throws InputError (file = source) naming a missing or mistyped field. Pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace meshplan {

struct SweepRow {
  std::string name;
  std::string device;      // measured environment.device
  std::string hardware;    // the hardware file predicted for (estimate setup.gpu)
  std::string model;
  std::string plan;        // ToPlanString form
  std::string precision;
  int64_t seq_len = 0;
  int64_t global_batch = 0;
  double predicted_step_s = 0;
  double measured_step_s = 0;
  double step_error_pct = 0;       // (predicted - measured) / measured * 100
  double predicted_peak_bytes = 0;
  double measured_peak_bytes = 0;  // rank 0, allocator max allocated
  double measured_reserved_bytes = 0;  // rank 0, allocator max reserved (0: not recorded)
  double memory_error_pct = 0;
  double predicted_mfu = 0;
  double measured_mfu = 0;
  double measured_tokens_per_s = 0;
};

SweepRow SweepRowFromJson(const nlohmann::json& record, const std::string& source);

// A Markdown table, one row per record in the given order, with a header naming the
// units (ms, GB = 1e9 bytes, %), and a summary line: rows, median |step error|, median
// |memory error|.
std::string FormatSweepTable(const std::vector<SweepRow>& rows);

nlohmann::json SweepRowToJson(const SweepRow& row);

}  // namespace meshplan
