// calibrate --from-logs (planner/measure/framework_log/log_calibration.h): Megatron-LM logs
// synthesised from a profile with known factors are read back and the factors recovered within
// 2%; runs that cannot tell the factors apart are refused; the CLI writes a profile that
// `compare --framework FILE` takes.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <fstream>

#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/cost/cost_model.h"
#include "planner/input_error.h"
#include "planner/measure/framework_log/framework_log.h"
#include "planner/measure/framework_log/log_calibration.h"
#include "tests/cli_run.h"
#include "tests/planner/test_util.h"
#include "tests/scratch_dir.h"

namespace meshplan {
namespace {

using test::ErrorOf;

std::string PlanPath() {
  return std::string(MESHPLAN_SOURCE_DIR) + "/tests/data/framework_logs/megatron_plan.yaml";
}

// The plan of megatron_plan.yaml with another sequence length and micro-batch.
PlanFile Variant(int64_t seq_len, int64_t mbs) {
  PlanFile p = LoadPlanFile(PlanPath());
  p.training.seq_len = seq_len;
  p.plan.micro_batch = mbs;
  return p;
}

// A Megatron-LM log (training_log's iteration line, megatron/training/training.py) of `plan`'s
// run under `truth`: 4 iteration lines, the first slower (warm-up).
std::string SynthesisedLog(const PlanFile& plan, const FrameworkSpec& truth) {
  TrainingSpec t = plan.training;
  t.framework = truth;
  const double ms = Estimate(plan.model, plan.cluster, t, plan.plan).time.total_s * 1e3;
  std::string log;
  for (int i = 1; i <= 4; ++i)
    log += fmt::format(" [2026-08-22 15:00:00.000000] iteration {:8d}/{:8d} | consumed samples: "
                       "{:12d} | elapsed time per iteration (ms): {:.1f} | global batch size: "
                       "{:5d} | lm loss: {:.6E} |\n",
                       i, 4, i * plan.training.global_batch, i == 1 ? 3 * ms : ms,
                       plan.training.global_batch, 10.0 / i);
  return log;
}

struct Synthesised {
  std::vector<LoggedStepTime> runs;
  std::vector<std::string> files, plans;
};

Synthesised Synthesise(const test::ScratchDir& scratch, const FrameworkSpec& truth,
                       const std::vector<std::pair<int64_t, int64_t>>& shapes) {
  Synthesised s;
  for (const auto& [seq, mbs] : shapes) {
    const PlanFile plan = Variant(seq, mbs);
    const std::string name = fmt::format("s{}_m{}", seq, mbs);
    scratch.Write(name + ".log", SynthesisedLog(plan, truth));
    scratch.Write(name + ".yaml", PlanFileToYaml(plan));
    s.files.push_back(scratch.Path(name + ".log"));
    s.plans.push_back(scratch.Path(name + ".yaml"));
    const LoggedRun run = ReadFrameworkLogs(LogFormat::kMegatron, {s.files.back()}, RunShapeOf(plan));
    s.runs.push_back({plan, MeasurementOfRun(run, plan, 1, s.files.back()).median_step_s, s.files.back()});
  }
  return s;
}

TEST_CASE("calibrate --from-logs recovers the factors of the profile that wrote the logs within 2%",
          "[planner][framework_log][calibrate]") {
  const test::ScratchDir scratch("log_calibration");
  const FrameworkSpec base = LoadFramework("megatron-core");
  REQUIRE(base.calibration.fit_compute);
  REQUIRE(base.calibration.fit_bandwidth);
  FrameworkSpec truth = base;
  truth.calibration.compute_scale = 0.8;
  truth.calibration.bandwidth_scale = 1.3;
  const Synthesised s = Synthesise(scratch, truth, {{512, 1}, {1024, 4}, {4096, 1}, {8192, 2}});
  const LogCalibrationFit fit = FitFrameworkCalibration(base, s.runs);
  CHECK(fit.framework.calibration.compute_scale == Approx(0.8).epsilon(0.02));
  CHECK(fit.framework.calibration.bandwidth_scale == Approx(1.3).epsilon(0.02));
  CHECK(fit.rms_relative_error < 0.001);  // the logs round to 0.1 ms

  // Only what is declared fittable moves.
  FrameworkSpec compute_only = base;
  compute_only.calibration.fit_bandwidth = false;
  compute_only.calibration.bandwidth_scale = 1.3;
  const LogCalibrationFit one = FitFrameworkCalibration(compute_only, {s.runs[2]});
  CHECK(one.framework.calibration.compute_scale == Approx(0.8).epsilon(0.02));
  CHECK(one.framework.calibration.bandwidth_scale == 1.3);
}

TEST_CASE("calibrate --from-logs refuses what the runs cannot determine",
          "[planner][framework_log][calibrate][hostile]") {
  const test::ScratchDir scratch("log_calibration_bad");
  const FrameworkSpec base = LoadFramework("megatron-core");
  const Synthesised s = Synthesise(scratch, base, {{4096, 1}});
  CHECK_THAT(ErrorOf([&] { FitFrameworkCalibration(base, s.runs); }).what(),
             Catch::Contains("1 run(s) cannot determine 2 fitted factors"));
  const Synthesised same = Synthesise(scratch, base, {{4096, 1}, {4096, 1}});
  CHECK_THAT(ErrorOf([&] { FitFrameworkCalibration(base, same.runs); }).what(),
             Catch::Contains("cannot tell compute_scale from bandwidth_scale"));
  CHECK_THAT(ErrorOf([&] { FitFrameworkCalibration(LoadFramework("meshplan"), s.runs); }).what(),
             Catch::Contains("declares nothing fittable"));
}

TEST_CASE("meshplan calibrate --from-logs writes a profile that compare --framework FILE takes",
          "[planner][framework_log][calibrate][cli]") {
  const test::ScratchDir scratch("log_calibration_cli");
  FrameworkSpec truth = LoadFramework("megatron-core");
  truth.calibration.compute_scale = 0.9;
  truth.calibration.bandwidth_scale = 0.7;
  const Synthesised s = Synthesise(scratch, truth, {{512, 1}, {1024, 4}, {8192, 2}});
  std::string logs, plans;
  for (size_t i = 0; i < s.files.size(); ++i) {
    logs += " '" + s.files[i] + "'";
    plans += " '" + s.plans[i] + "'";
  }
  const std::string out = scratch.Path("fitted.yaml");
  const test::CliResult r = test::RunMeshplan("calibrate --from-logs" + logs + " --plan" + plans +
                                              " --framework megatron-core --out '" + out + "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("compute_scale 0.") && Catch::Contains("(fitted)") &&
                          Catch::Contains("wrote"));  // the values: fitted below
  const FrameworkSpec fitted = LoadFramework(out);
  CHECK(fitted.calibration.compute_scale == Approx(0.9).epsilon(0.02));
  CHECK(fitted.calibration.bandwidth_scale == Approx(0.7).epsilon(0.02));
  CHECK(fitted.log_format == LogFormat::kMegatron);
  // The fitted profile predicts the logged step within 1%.
  const test::CliResult c = test::RunMeshplan("compare '" + s.plans[2] + "' --log '" + s.files[2] +
                                              "' --framework '" + out + "' --tolerance 1000");
  INFO(c.output);
  CHECK(c.exit_code == 0);
  CHECK_THAT(c.output, Catch::Contains("fitted"));
  // A bad run: exit 2, nothing written.
  const std::string bad_out = scratch.Path("never.yaml");
  const test::CliResult bad = test::RunMeshplan("calibrate --from-logs '" + s.plans[0] + "' --plan '" +
                                                s.plans[0] + "' --framework megatron-core --out '" +
                                                bad_out + "'");
  CHECK(bad.exit_code == 2);
  CHECK(!std::ifstream(bad_out).good());
}

}  // namespace
}  // namespace meshplan
