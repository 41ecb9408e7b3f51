// Compare: predicted vs measured per figure, the tolerance, figures without a
// prediction, refusing a measurement of another plan, and the `meshplan compare` CLI
// (exit 0 / 1 / 2) on files written here.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "planner/cost/cost_model.h"
#include "planner/cost/flops.h"
#include "planner/cost/memory_model.h"
#include "planner/input_error.h"
#include "planner/config/config_loader.h"
#include "planner/measure/compare.h"
#include "planner/names.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

namespace fs = std::filesystem;

// A small Llama on H100s, dp=2 x pp=2: ranks 0 and 2 hold stage 0, ranks 1 and 3 stage 1.
PlanFile SmallPlan() {
  PlanFile p;
  p.model = testing::SpecLlama(256, 8, 4, 768);
  p.model.name = "small";
  p.model.vocab_size = 8192;
  p.cluster = testing::H100Cluster(1, 4);
  p.training = testing::Training(8, 256, Precision::kFp32);
  p.plan.dp = 2;
  p.plan.pp = 2;
  return p;
}

double StagePeak(const PlanFile& p, int64_t stage) {
  return EstimateStageMemory(p.model, p.training, p.plan, MemoryModel::kDetailed, stage).total_bytes;
}

// A measurement of `p` whose memory is `memory_factor` x the prediction and whose
// time is `time_factor` x the predicted step time.
Measurement MeasuredAs(const PlanFile& p, const std::string& device, double memory_factor,
                       double time_factor) {
  Measurement m;
  m.environment = EnvironmentOfPlan(p);
  m.environment.device = device;
  for (int64_t rank = 0; rank < 4; ++rank)
    m.peak_memory_bytes.push_back(static_cast<int64_t>(StagePeak(p, rank % 2) * memory_factor));
  const PlanCost cost = Estimate(p.model, p.cluster, p.training, p.plan);
  m.median_step_s = cost.time.total_s * time_factor;
  m.tokens_per_s = static_cast<double>(p.training.tokens_per_step()) / m.median_step_s;
  m.tokens_per_step = p.training.tokens_per_step();
  return m;
}

const FigureComparison& Figure(const Comparison& c, const std::string& name) {
  for (const FigureComparison& f : c.figures)
    if (f.figure == name) return f;
  FAIL("no figure " << name);
  throw;
}

TEST_CASE("compare predicts memory for the attention core the run names", "[planner][compare]") {
  PlanFile p = SmallPlan();
  p.training.precision = Precision::kMixed;  // auto: fused attention
  p.plan.micro_batch = 4;                     // activations set the peak
  MemoryOptions naive;
  naive.attention = AttentionImpl::kNaive;
  const double naive_peak =
      EstimateStageMemory(p.model, p.training, p.plan, MemoryModel::kDetailed, 0, naive).total_bytes;
  REQUIRE(naive_peak != StagePeak(p, 0));  // the naive core keeps the probabilities
  Measurement m = MeasuredAs(p, "cpu", 1.0, 1.0);
  m.environment.attention = "naive";  // a CPU run: the naive core
  const Comparison c = ComparePlan(p, m, 2.0);
  CHECK(c.figures[0].predicted == naive_peak);
  m.environment.attention = "";  // an older file: auto
  CHECK(ComparePlan(p, m, 2.0).figures[0].predicted == StagePeak(p, 0));
  m.environment.attention = "sparse";
  CHECK_THROWS_WITH(ComparePlan(p, m, 2.0),
                    Catch::Contains("environment.attention") && Catch::Contains("naive, fused"));
}

TEST_CASE("compare times the fused core with the kernel SDPA picked in the run",
          "[planner][compare]") {
  PlanFile p = SmallPlan();
  p.training.precision = Precision::kMixed;  // a fused core on the GPU
  p.cluster.gpu = LoadGpu("h100-sxm");       // which gives a cuDNN figure
  Measurement m = MeasuredAs(p, "NVIDIA H100 80GB HBM3", 1.0, 1.0);
  auto step = [&](const std::string& kernel) {
    m.environment.attention_kernel = kernel;
    return Figure(ComparePlan(p, m, 50.0), "step time").predicted;
  };
  const double flash2 = step("flash2");
  CHECK(step("cudnn") < flash2);  // cuDNN's rate, 0.514 of peak against 0.319
  // The profile's kernel where the run names none, or one meshplan has no figure for.
  const double profile = step("");
  for (const char* kept : {"efficient", "math", "other"}) CHECK(step(kept) == profile);
  m.environment.attention_kernel = "turbo";
  CHECK_THROWS_WITH(ComparePlan(p, m, 2.0), Catch::Contains("environment.attention_kernel") &&
                                                Catch::Contains("flash2, flash3, cudnn"));
}

TEST_CASE("compare predicts the optimizer's workspace for the AdamW kernel the run names",
          "[planner][compare]") {
  PlanFile p = SmallPlan();
  p.training.seq_len = 8;  // few activations: the optimizer's workspace sets the peak
  p.training.global_batch = 2;
  MemoryOptions fused;
  fused.fused_adamw = true;
  Measurement m = MeasuredAs(p, "cpu", 1.0, 1.0);
  m.environment.adamw = "fused";
  const double fused_peak = ComparePlan(p, m, 2.0).figures[0].predicted;
  REQUIRE(fused_peak < StagePeak(p, 0));  // the optimizer phase is this stage's peak
  CHECK(fused_peak ==
        EstimateStageMemory(p.model, p.training, p.plan, MemoryModel::kDetailed, 0, fused).total_bytes);
  m.environment.adamw = "unfused";
  CHECK(ComparePlan(p, m, 2.0).figures[0].predicted == StagePeak(p, 0));
  m.environment.adamw = "";  // an older file: unfused
  CHECK(ComparePlan(p, m, 2.0).figures[0].predicted == StagePeak(p, 0));
  m.environment.adamw = "fast";
  CHECK_THROWS_WITH(ComparePlan(p, m, 2.0),
                    Catch::Contains("environment.adamw") && Catch::Contains("fused, unfused"));
}

TEST_CASE("compare: memory per rank against its pipeline stage, error in %", "[planner][compare]") {
  const PlanFile p = SmallPlan();
  REQUIRE(StagePeak(p, 0) != StagePeak(p, 1));  // the stages really differ
  const Comparison c = ComparePlan(p, MeasuredAs(p, "NVIDIA H100 80GB HBM3", 1.01, 1.05), 2.0);
  REQUIRE(c.figures.size() == 8);  // 4 ranks + step time + tokens/s + its two per-GPU rates
  const FigureComparison& rank3 = Figure(c, "peak memory rank 3 (stage 1)");
  CHECK(rank3.predicted == Approx(StagePeak(p, 1)));
  // predicted / (1.01 predicted) - 1 = -0.99%
  CHECK(rank3.error_pct == Approx(-0.990).margin(0.01));
  CHECK(rank3.status == FigureStatus::kWithin);
  CHECK(Figure(c, "peak memory rank 2 (stage 0)").predicted == Approx(StagePeak(p, 0)));
  // Step time 5% slower than predicted: -4.76%, outside 2%.
  const FigureComparison& time = Figure(c, "step time");
  CHECK(time.error_pct == Approx(-4.762).margin(0.01));
  CHECK(time.status == FigureStatus::kOutside);
  CHECK(Figure(c, "tokens/s").error_pct == Approx(5.0).margin(0.01));
  REQUIRE(c.Failures().size() == 2);
  CHECK_THAT(c.Failures()[0], Catch::Contains("step time") && Catch::Contains("-4.8%"));
  CHECK(ComparePlan(p, MeasuredAs(p, "NVIDIA H100 80GB HBM3", 1.01, 1.05), 6.0).Failures().empty());
}

TEST_CASE("compare: an offloading plan gets a host line per rank beside the device's peak",
          "[planner][compare][offload]") {
  PlanFile p = SmallPlan();
  p.plan.offload_optimizer = true;
  Measurement m = MeasuredAs(p, "cpu", 1.0, 1.0);
  const MemoryBreakdown stage1 =
      EstimateStageMemory(p.model, p.training, p.plan, MemoryModel::kDetailed, 1);
  REQUIRE(stage1.host_optimizer_bytes > 0);
  for (int rank = 0; rank < 4; ++rank) {
    RankMeasurement r;
    r.rank = rank;
    r.host_optimizer_bytes = static_cast<int64_t>(
        EstimateStageMemory(p.model, p.training, p.plan, MemoryModel::kDetailed, rank % 2)
            .host_optimizer_bytes * (rank == 3 ? 1.1 : 1.0));
    m.ranks.push_back(r);
  }
  const Comparison c = ComparePlan(p, m, 2.0);
  CHECK(Figure(c, "host memory rank 1 (stage 1)").status == FigureStatus::kWithin);
  const FigureComparison& rank3 = Figure(c, "host memory rank 3 (stage 1)");
  CHECK(rank3.predicted == Approx(stage1.host_optimizer_bytes));
  CHECK(rank3.status == FigureStatus::kOutside);
  REQUIRE(c.Failures().size() == 1);
  CHECK_THAT(FormatComparisonTable(c), Catch::Contains("host memory rank 0 (stage 0)"));
  // An older file without host bytes: listed, nothing measured, never a failure.
  for (RankMeasurement& r : m.ranks) r.host_optimizer_bytes = 0;
  const Comparison old = ComparePlan(p, m, 2.0);
  CHECK(Figure(old, "host memory rank 0 (stage 0)").status == FigureStatus::kNoPrediction);
  CHECK(old.Failures().empty());
  // Without offload: no host lines.
  p.plan.offload_optimizer = false;
  for (const FigureComparison& f : ComparePlan(p, MeasuredAs(p, "cpu", 1.0, 1.0), 2.0).figures)
    CHECK(f.figure.find("host") == std::string::npos);
}

TEST_CASE("compare: memory outside the tolerance fails, naming the rank", "[planner][compare]") {
  const PlanFile p = SmallPlan();
  const Comparison c = ComparePlan(p, MeasuredAs(p, "NVIDIA H100 80GB HBM3", 0.9, 1.0), 2.0);
  const auto failures = c.Failures();
  REQUIRE(failures.size() == 4);
  CHECK_THAT(failures[1], Catch::Contains("peak memory rank 1 (stage 1)") &&
                              Catch::Contains("+11.1%"));
}

TEST_CASE("compare: a CPU run against GPU hardware has no time prediction and does not fail",
          "[planner][compare]") {
  const PlanFile p = SmallPlan();
  const Comparison c = ComparePlan(p, MeasuredAs(p, "cpu", 1.0, 3.0), 2.0);
  const FigureComparison& time = Figure(c, "step time");
  CHECK(time.status == FigureStatus::kNoPrediction);
  CHECK_THAT(time.note, Catch::Contains("h100") && Catch::Contains("cpu"));
  CHECK(c.Failures().empty());
  CHECK_THAT(FormatComparisonTable(c), Catch::Contains("no prediction") && Catch::Contains("note:"));
  const nlohmann::json j = ComparisonToJson(c);
  CHECK(j.at("figures").at(4).at("predicted").is_null());
  CHECK(j.at("within_tolerance") == true);

  // A CPU profile does describe the CPU.
  PlanFile cpu = p;
  cpu.cluster.gpu.name = "cpu-test";
  const Comparison calibrated = ComparePlan(cpu, MeasuredAs(cpu, "cpu", 1.0, 1.0), 2.0);
  CHECK(Figure(calibrated, "step time").status == FigureStatus::kWithin);
  CHECK(Figure(calibrated, "step time").note.empty());

  // Its rates are those of threads_per_rank threads: a run with others is named in a note.
  cpu.cluster.gpu.threads_per_rank = 2;
  Measurement other = MeasuredAs(cpu, "cpu", 1.0, 1.0);
  other.environment.intra_op_threads = 1;
  const Comparison threads_differ = ComparePlan(cpu, other, 2.0);
  const FigureComparison& step = Figure(threads_differ, "step time");
  CHECK(step.status == FigureStatus::kWithin);
  CHECK_THAT(step.note, Catch::Contains("1 intra-op thread(s) each") && Catch::Contains("those of 2"));
  other.environment.intra_op_threads = 2;
  CHECK(Figure(ComparePlan(cpu, other, 2.0), "step time").note.empty());
}

TEST_CASE("compare prints the per-GPU rates beside tokens/s, never failing twice",
          "[planner][compare][per_gpu]") {
  const PlanFile p = SmallPlan();
  const Measurement m = MeasuredAs(p, "NVIDIA H100 80GB HBM3", 1.0, 2.0);  // twice as slow
  const PlanCost cost = Estimate(p.model, p.cluster, p.training, p.plan);
  const Comparison c = ComparePlan(p, m, 10.0);
  const FigureComparison& tokens = Figure(c, "tokens/s per GPU");
  const FigureComparison& tflops = Figure(c, "model TFLOP/s per GPU");
  CHECK(tokens.measured == Approx(m.tokens_per_s / 4));
  CHECK(tokens.predicted == Approx(cost.tokens_per_s_per_gpu));
  CHECK(tflops.measured == Approx(cost.model_flops_per_step / m.median_step_s / 4));
  CHECK(tflops.predicted == Approx(cost.model_flops_per_s_per_gpu));
  CHECK(tflops.error_pct == Approx(100.0));  // the predicted rate is twice the measured
  CHECK(tflops.status == FigureStatus::kOutside);
  // The step time and tokens/s fail; their per-GPU copies are not counted again.
  CHECK(c.Failures().size() == 2);
  CHECK_THAT(FormatComparisonTable(c), Catch::Contains("model TFLOP/s per GPU") &&
                                           Catch::Contains(kModelFlopsConvention));
  CHECK(ComparisonToJson(c)["figures"].back()["derived"] == true);
}

TEST_CASE("compare: hardware names and device names", "[planner][compare]") {
  GpuSpec gpu;
  gpu.name = "h100-sxm";
  CHECK(HardwareDescribesDevice(gpu, "NVIDIA H100 80GB HBM3"));
  CHECK_FALSE(HardwareDescribesDevice(gpu, "NVIDIA A100-SXM4-80GB"));
  CHECK_FALSE(HardwareDescribesDevice(gpu, "cpu"));
  gpu.name = "cpu-epyc";
  CHECK(HardwareDescribesDevice(gpu, "cpu"));
  CHECK_FALSE(HardwareDescribesDevice(gpu, "NVIDIA H100 80GB HBM3"));
}

TEST_CASE("compare refuses a measurement of another plan", "[planner][compare]") {
  const PlanFile p = SmallPlan();
  Measurement m = MeasuredAs(p, "cpu", 1.0, 1.0);
  m.environment.plan = "dp=4,tp=1,pp=1,cp=1,zero=0,sp=0,mbs=1,recompute=none,schedule=1f1b,vpp=1";
  CHECK_THROWS_AS(ComparePlan(p, m, 2.0), InputError);
  m = MeasuredAs(p, "cpu", 1.0, 1.0);
  m.environment.seq_len = 128;
  CHECK_THROWS_WITH(ComparePlan(p, m, 2.0, "m.json"),
                    Catch::Contains("m.json") && Catch::Contains("seq_len"));
}

// The CLI on files: exit 0 within, 1 outside (named on stderr), 2 for bad input.
int RunCli(const std::string& args, const fs::path& err) {
  const std::string command =
      std::string(MESHPLAN_BINARY) + " " + args + " >/dev/null 2>" + err.string();
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_CASE("compare: emulated ranks beside their stage, the step without the bubble, the "
          "communication named",
          "[planner][compare][emulate]") {
  const PlanFile p = SmallPlan();
  const PlanCost cost = Estimate(p.model, p.cluster, p.training, p.plan);
  Measurement m = MeasuredAs(p, "NVIDIA H100 80GB HBM3", 1.0, 1.0);
  m.emulated_comm = "model";
  RankMeasurement r3;
  r3.rank = 3;  // stage 1
  m.ranks = {r3};
  m.peak_memory_bytes = {static_cast<int64_t>(StagePeak(p, 1))};
  double exposed_s = 0;
  for (double s : cost.time.exposed_comm_s.values) exposed_s += s;
  m.median_step_s = cost.time.compute_s + cost.time.optimizer_s + exposed_s;
  Comparison c = ComparePlan(p, m, 1.0);
  REQUIRE(c.figures.size() == 2);  // one rank's memory and the step; no tokens/s
  CHECK(c.figures[0].figure == "peak memory rank 3 (stage 1)");
  CHECK(c.figures[0].status == FigureStatus::kWithin);
  const FigureComparison& step = Figure(c, "step time, emulated peers (communication modelled)");
  CHECK(step.status == FigureStatus::kWithin);
  CHECK(step.predicted == Approx(m.median_step_s));
  CHECK_THAT(step.note, Catch::Contains("cost model") && Catch::Contains("bubble"));
  CHECK_THAT(FormatComparisonTable(c), Catch::Contains("communication modelled"));

  m.emulated_comm = "zero";
  c = ComparePlan(p, m, 1.0);
  CHECK(Figure(c, "step time, emulated peers (no communication)").predicted ==
        Approx(cost.time.compute_s + cost.time.optimizer_s));
  m.peak_memory_bytes = {1, 2};
  CHECK_THROWS_WITH(ComparePlan(p, m, 1.0), Catch::Contains("peak_memory_bytes"));
}

TEST_CASE("meshplan compare exits 0, 1 or 2", "[planner][compare][cli]") {
  char pattern[] = "/tmp/meshplan_compare_XXXXXX";
  const fs::path dir = ::mkdtemp(pattern);
  const PlanFile p = SmallPlan();
  SavePlanFile((dir / "plan.yaml").string(), p);
  const PlanFile loaded = LoadPlanFile((dir / "plan.yaml").string());
  std::ofstream(dir / "good.json") << MeasurementToJson(MeasuredAs(loaded, "cpu", 1.005, 1.0)).dump();
  std::ofstream(dir / "bad.json") << MeasurementToJson(MeasuredAs(loaded, "cpu", 0.8, 1.0)).dump();
  std::ofstream(dir / "broken.json") << "{\"environment\": 3}";
  const fs::path err = dir / "err.txt";
  auto read_err = [&] {
    std::ifstream in(err);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string plan = (dir / "plan.yaml").string();
  CHECK(RunCli("compare " + plan + " " + (dir / "good.json").string() + " --tolerance 1", err) == 0);
  CHECK(RunCli("compare " + plan + " " + (dir / "bad.json").string() + " --tolerance 1", err) == 1);
  CHECK_THAT(read_err(), Catch::Contains("peak memory rank 0"));
  CHECK(RunCli("compare " + plan + " " + (dir / "broken.json").string(), err) == 2);
  CHECK(RunCli("compare " + plan + " " + (dir / "missing.json").string(), err) == 2);
  CHECK(RunCli("compare " + plan + " " + (dir / "good.json").string() + " --format json", err) == 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace meshplan
