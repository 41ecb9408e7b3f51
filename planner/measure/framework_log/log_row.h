// One row of `meshplan measurements` (planner/measure/sweep_table.h) for a run read from a
// framework's log: the table of predicted vs measured over a folder of logs, as over sweep
// records.
#pragma once

#include <string>

#include "planner/config/config_loader.h"
#include "planner/framework_spec.h"
#include "planner/measure/measurement.h"
#include "planner/measure/sweep_table.h"

namespace meshplan {

// The row of `measured` (MeasurementOfRun of plan_file) named `name`, predicted under
// `framework` (CompareLoggedRun): step time, tokens/s, MFU (the predicted MFU scaled by
// predicted / measured step), and the memory of the lowest reported rank (its max allocated,
// else its max reserved; 0 when the log reports none).
SweepRow RowOfLoggedRun(const PlanFile& plan_file, const FrameworkSpec& framework,
                        const Measurement& measured, const std::string& name);

}  // namespace meshplan
