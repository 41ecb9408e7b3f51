// The sweep-record table (planner/measure/sweep_table.h, `meshplan measurements`) on the fixture
// tests/data/sweep/: two records that scripts/gpu_sweep.sh --cpu-smoke wrote on a CPU
// (tiny-llama; the same pipeline the GPU sweep runs), plus its calibration report, which
// a folder listing must skip.
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "planner/input_error.h"
#include "planner/measure/sweep_table.h"
#include "tests/cli_run.h"

namespace meshplan {
namespace {

const std::string kFixtures = std::string(MESHPLAN_SOURCE_DIR) + "/tests/data/sweep/";

nlohmann::json Load(const std::string& name) {
  std::ifstream in(kFixtures + name);
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

// Output (stdout and stderr) and exit code of a shell command.
std::pair<std::string, int> Run(const std::string& command) {
  const test::CliResult r = test::RunShell(command + " 2>&1");
  return {r.output, r.exit_code};
}

TEST_CASE("sweep table: a record's row holds the prediction beside the measurement",
          "[planner][sweep]") {
  const nlohmann::json record = Load("tiny-fp32-s128-mbs2-none.json");
  const SweepRow row = SweepRowFromJson(record, "fixture");
  CHECK(row.name == "tiny-fp32-s128-mbs2-none");
  CHECK(row.model == "tiny-llama");
  CHECK(row.precision == "fp32");
  CHECK(row.seq_len == 128);
  CHECK(row.global_batch == 4);
  CHECK(row.device == "cpu");
  CHECK(row.hardware == "cpu-smoke-calibrated");
  CHECK_THAT(row.plan, Catch::Contains("mbs=2") && Catch::Contains("recompute=none"));
  // Step time: the estimate's prediction, the run's median, the comparison's error.
  CHECK(row.predicted_step_s == Approx(record["estimate"]["step_time_s"].get<double>()));
  CHECK(row.measured_step_s == Approx(record["measured"]["median_step_s"].get<double>()));
  CHECK(row.step_error_pct ==
        Approx((row.predicted_step_s - row.measured_step_s) / row.measured_step_s * 100));
  CHECK(row.measured_peak_bytes ==
        Approx(record["measured"]["peak_memory_bytes"][0].get<double>()));
  CHECK(row.measured_reserved_bytes == 0);  // a CPU run records no reserved bytes
  // MFU at the measured time: same FLOPs, same peak.
  CHECK(row.measured_mfu == Approx(row.predicted_mfu * row.predicted_step_s / row.measured_step_s));
  CHECK(row.measured_tokens_per_s == Approx(record["measured"]["tokens_per_s"].get<double>()));
}

TEST_CASE("sweep table: markdown rows, units and the summary", "[planner][sweep]") {
  std::vector<SweepRow> rows = {SweepRowFromJson(Load("tiny-fp32-s128-mbs2-none.json"), "a"),
                                SweepRowFromJson(Load("tiny-fp32-s256-mbs1-full.json"), "b")};
  rows[0].step_error_pct = -4;
  rows[1].step_error_pct = 8;
  rows[0].memory_error_pct = 1;
  rows[1].memory_error_pct = -3;
  rows[1].measured_reserved_bytes = 2.5 * 1024 * 1024 * 1024;
  const std::string table = FormatSweepTable(rows);
  CHECK_THAT(table, Catch::StartsWith("| plan | model | precision | seq |"));
  CHECK_THAT(table, Catch::Contains("step predicted (ms)") && Catch::Contains("peak measured (GiB)"));
  CHECK_THAT(table, Catch::Contains("| tiny-fp32-s128-mbs2-none | tiny-llama | fp32 | 128 | 4 |"));
  CHECK_THAT(table, Catch::Contains("| -4.0% |") && Catch::Contains("| +8.0% |"));
  CHECK_THAT(table, Catch::Contains("| 2.50 |"));  // reserved GiB where recorded, "-" elsewhere
  CHECK_THAT(table, Catch::Contains("| - |"));
  CHECK_THAT(table, Catch::Contains("2 plans; median |step time error| 6.0%, median |peak "
                                    "memory error| 2.0%"));
}

TEST_CASE("sweep table: a broken record names the field", "[planner][sweep]") {
  nlohmann::json record = Load("tiny-fp32-s128-mbs2-none.json");
  record["estimate"]["setup"].erase("seq_len");
  try {
    SweepRowFromJson(record, "broken.json");
    FAIL("expected InputError");
  } catch (const InputError& e) {
    CHECK(e.where().file == "broken.json");
    CHECK(e.field() == "estimate/setup/seq_len");
  }
  record = Load("tiny-fp32-s128-mbs2-none.json");
  record["record"] = "something else";
  CHECK_THROWS_AS(SweepRowFromJson(record, "x"), InputError);
  record = Load("tiny-fp32-s128-mbs2-none.json");
  record["comparison"]["figures"] = nlohmann::json::array();
  CHECK_THROWS_WITH(SweepRowFromJson(record, "x"), Catch::Contains("step time"));
}

TEST_CASE("meshplan measurements: the table from a folder of records", "[planner][sweep][cli]") {
  const auto [out, code] = Run(std::string("'") + MESHPLAN_BINARY + "' measurements '" + kFixtures + "'");
  INFO(out);
  CHECK(code == 0);
  CHECK_THAT(out, Catch::Contains("| tiny-fp32-s128-mbs2-none |") &&
                      Catch::Contains("| tiny-fp32-s256-mbs1-full |") &&
                      Catch::Contains("2 plans;"));  // calibration.json skipped
  const auto [json_out, json_code] =
      Run(std::string("'") + MESHPLAN_BINARY + "' measurements '" + kFixtures + "' --format json");
  CHECK(json_code == 0);
  CHECK(nlohmann::json::parse(json_out).size() == 2);
  const auto [bad, bad_code] = Run(std::string("'") + MESHPLAN_BINARY + "' measurements '" +
                                   kFixtures + "calibration.json'");
  CHECK(bad_code == 2);
  CHECK_THAT(bad, Catch::Contains("record"));
}

}  // namespace
}  // namespace meshplan
