// Reading frameworks' logs back (planner/measure/framework_log/): the golden logs of
// tests/data/framework_logs/ (written in each framework's own format, README.md there cites
// the source), hostile logs refused with file, line and what was expected, the comparison under
// the framework's profile, and `meshplan compare --log` (exit 0 / 1 / 2).
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/input_error.h"
#include "planner/measure/compare.h"
#include "planner/measure/framework_log/framework_log.h"
#include "tests/cli_run.h"
#include "tests/planner/test_util.h"
#include "tests/scratch_dir.h"

namespace meshplan {
namespace {

using test::ErrorOf;

std::string Data(const std::string& name) {
  return std::string(MESHPLAN_SOURCE_DIR) + "/tests/data/framework_logs/" + name;
}

std::string TextOf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

constexpr double kMiB = 1024.0 * 1024.0, kGiB = kMiB * 1024.0;

TEST_CASE("Megatron-LM: iteration lines and every reported rank's memory", "[planner][framework_log]") {
  const PlanFile plan = LoadPlanFile(Data("megatron_plan.yaml"));
  const LoggedRun run = ReadFrameworkLogs(LogFormat::kMegatron, {Data("megatron.log")}, RunShapeOf(plan));
  REQUIRE(run.samples.size() == 6);
  CHECK(run.samples[0].step == 10);
  CHECK(run.samples[0].seconds == Approx(2.9503));
  CHECK(run.samples[0].line == 4);
  CHECK(run.samples[5].loss == Approx(8.11234));
  REQUIRE(run.memory.size() == 4);
  CHECK(run.memory[2].rank == 4);
  CHECK(run.memory[2].max_allocated_bytes == static_cast<int64_t>(37340.5 * kMiB));
  CHECK(run.memory[0].max_reserved_bytes == static_cast<int64_t>(45056.0 * kMiB));
  const Measurement m = MeasurementOfRun(run, plan, 1, "megatron.log");
  CHECK(m.median_step_s == Approx(1.8315));  // the median of the five after the first
  CHECK(m.tokens_per_s > 0);
  CHECK(m.losses.size() == 6);
}

TEST_CASE("torchtitan: coloured step lines behind torchrun's rank prefix, tps becomes step time",
          "[planner][framework_log]") {
  const PlanFile plan = LoadPlanFile(Data("torchtitan_plan.yaml"));
  const LoggedRun run =
      ReadFrameworkLogs(LogFormat::kTorchtitan, {Data("torchtitan.log")}, RunShapeOf(plan));
  REQUIRE(run.samples.size() == 5);
  CHECK(run.samples[1].step == 10);
  CHECK(run.samples[1].seconds == Approx(16.0 * 8192 / (6134.0 * 8)));
  CHECK(run.samples[1].loss == Approx(10.0214));
  REQUIRE(run.memory.size() == 1);
  CHECK(run.memory[0].rank == 0);
  CHECK(run.memory[0].max_allocated_bytes == 0);  // torchtitan prints reserved memory only
  CHECK(run.memory[0].max_reserved_bytes == static_cast<int64_t>(61.42 * kGiB));
}

TEST_CASE("torchtitan's earlier step lines: without tflops (December 2024), wps for tps "
          "(April 2024)", "[planner][framework_log]") {
  const PlanFile december = LoadPlanFile(Data("torchtitan_2024_12_plan.yaml"));
  const LoggedRun dec = ReadFrameworkLogs(LogFormat::kTorchtitan, {Data("torchtitan_2024_12.log")},
                                          RunShapeOf(december));
  REQUIRE(dec.samples.size() == 3);
  CHECK(dec.samples[1].step == 10);
  CHECK(dec.samples[1].seconds == Approx(16.0 * 8192 / (5762.0 * 8)));
  CHECK(dec.samples[2].loss == Approx(8.9021));
  REQUIRE(dec.memory.size() == 1);
  CHECK(dec.memory[0].max_reserved_bytes == static_cast<int64_t>(82.40 * kGiB));
  const PlanFile april = LoadPlanFile(Data("torchtitan_2024_04_plan.yaml"));
  const LoggedRun apr = ReadFrameworkLogs(LogFormat::kTorchtitan, {Data("torchtitan_2024_04.log")},
                                          RunShapeOf(april));
  REQUIRE(apr.samples.size() == 3);
  CHECK(apr.samples[1].seconds == Approx(64.0 * 8192 / (2904.0 * 64)));
  CHECK(apr.memory.at(0).rank == 0);  // no rank prefix: rank 0
  // A line cut short after the figure is still refused, whatever the version.
  const std::string cut = "step: 10  loss: 10.0214  memory: 82.40GiB(86.71%)  tps: 5,7\n";
  const InputError short_line =
      ErrorOf([&] { ParseTorchtitanLog(cut, "cut.log", RunShapeOf(december)); });
  CHECK(short_line.field() == "tps");
}

TEST_CASE("DeepSpeed: ThroughputTimer lines, the global batch over CurrSamplesPerSec",
          "[planner][framework_log]") {
  const PlanFile plan = LoadPlanFile(Data("deepspeed_plan.yaml"));
  const LoggedRun run =
      ReadFrameworkLogs(LogFormat::kDeepspeed, {Data("deepspeed.log")}, RunShapeOf(plan));
  REQUIRE(run.samples.size() == 5);
  CHECK(run.samples[4].step == 50);
  CHECK(run.samples[4].seconds == Approx(32 / 17.3312345678));
  CHECK(run.samples[4].loss < 0);  // not logged
  REQUIRE(run.memory.size() == 1);
  CHECK(run.memory[0].max_allocated_bytes == static_cast<int64_t>(38.88 * kGiB));
}

TEST_CASE("the PyTorch hook: one JSON per rank, the slowest rank times each step",
          "[planner][framework_log]") {
  const PlanFile plan = LoadPlanFile(Data("pytorch_plan.yaml"));
  const LoggedRun run = ReadFrameworkLogs(
      LogFormat::kPytorchHook, {Data("pytorch_rank0.json"), Data("pytorch_rank1.json")},
      RunShapeOf(plan));
  CHECK(run.device == "NVIDIA A40");
  REQUIRE(run.samples.size() == 6);
  CHECK(run.samples[1].seconds == Approx(1.2066));
  CHECK(run.samples[0].seconds == Approx(3.912));
  REQUIRE(run.memory.size() == 2);
  CHECK(run.memory[1].max_allocated_bytes == 20113463296);
  const InputError twice = ErrorOf([&] {
    ReadFrameworkLogs(LogFormat::kPytorchHook, {Data("pytorch_rank0.json"), Data("pytorch_rank0.json")},
                      RunShapeOf(plan));
  });
  CHECK_THAT(twice.what(), Catch::Contains("rank 0 is reported in"));
}

TEST_CASE("a logged run is predicted under the framework's profile, memory per reported rank",
          "[planner][framework_log]") {
  const PlanFile plan = LoadPlanFile(Data("megatron_plan.yaml"));
  const Measurement m = MeasurementOfRun(
      ReadFrameworkLogs(LogFormat::kMegatron, {Data("megatron.log")}, RunShapeOf(plan)), plan, 1,
      "megatron.log");
  const Comparison core = CompareLoggedRun(plan, LoadFramework("megatron-core"), m, 5, "megatron.log");
  CHECK(core.framework.rfind("megatron-core", 0) == 0);
  std::vector<std::string> names;
  for (const FigureComparison& f : core.figures) names.push_back(f.figure);
  CHECK(names == std::vector<std::string>{
                     "max allocated rank 0 (stage 0)", "max reserved rank 0 (stage 0)",
                     "max allocated rank 1 (stage 0)", "max reserved rank 1 (stage 0)",
                     "max allocated rank 4 (stage 1)", "max reserved rank 4 (stage 1)",
                     "max allocated rank 5 (stage 1)", "max reserved rank 5 (stage 1)",
                     "step time", "tokens/s", "tokens/s per GPU", "model TFLOP/s per GPU"});
  for (const FigureComparison& f : core.figures) {
    INFO(f.figure);
    CHECK(f.status != FigureStatus::kNoPrediction);  // h100 describes the assumed device
    CHECK(f.predicted > 0);
  }
  // Reserved memory holds more than allocated memory, in the prediction as in the log.
  CHECK(core.figures[1].predicted > core.figures[0].predicted);
  // Another profile predicts the same plan differently.
  const Comparison lm2021 = CompareLoggedRun(plan, LoadFramework("megatron-lm-2021"), m, 5, "megatron.log");
  CHECK(lm2021.figures.back().predicted != core.figures.back().predicted);
  CHECK(LoggedRankStage(plan.plan, 3) == 0);
  CHECK(LoggedRankStage(plan.plan, 4) == 1);
}

// Each hostile log: the error names the file, the line (when there is one) and the expectation.
TEST_CASE("bad logs are refused with file, line and what was expected",
          "[planner][framework_log][hostile]") {
  const std::string megatron = TextOf(Data("megatron.log"));
  const std::string deepspeed = TextOf(Data("deepspeed.log"));
  const std::string titan = TextOf(Data("torchtitan.log"));
  const std::string line4 = megatron.substr(megatron.find(" [2026"), megatron.find('\n', megatron.find(" [2026")) - megatron.find(" [2026"));
  const std::string head = megatron.substr(0, megatron.find(line4));
  struct Case {
    LogFormat format;
    std::string text, expect;
    int line;
  };
  const Case cases[] = {
      {LogFormat::kMegatron, head + line4.substr(0, line4.find("elapsed time") + 20) + "\n",
       "an iteration line without 'elapsed time per iteration (ms):'", 4},
      {LogFormat::kMegatron, head + line4.substr(0, line4.find("(ms): ") + 10) + "\n",
       "expected '|' after the number (is the line cut short?)", 4},
      {LogFormat::kMegatron, TextOf(Data("torchtitan.log")), "this looks like a torchtitan log", 0},
      {LogFormat::kMegatron, TextOf(Data("torchtitan_2024_04.log")), "this looks like a torchtitan log", 0},
      {LogFormat::kTorchtitan, megatron, "this looks like a megatron log", 0},
      {LogFormat::kDeepspeed, "nothing to see\nhere\n", "no deepspeed timing line", 0},
      {LogFormat::kDeepspeed, deepspeed + deepspeed.substr(deepspeed.find("[2026-08-22 15:00:00,000] [INFO] [timer")),
       "global_step 10 of rank 0 after its global_step 50 (line 7)", 8},
      {LogFormat::kMegatron, head + std::string(line4).replace(line4.find("(ms): ") + 6, 6, "nan   "),
       "expected a finite, non-negative number", 4},
      {LogFormat::kMegatron, head + std::string(line4).replace(line4.find("(ms): ") + 6, 6, "-2950."),
       "expected a finite, non-negative number", 4},
      {LogFormat::kMegatron, head + std::string("\x7f""ELF\x02\x01\x01\x00\x00", 9) + "\n",
       "binary data (byte 0x02)", 4},
      {LogFormat::kMegatron, head + std::string(line4).replace(line4.find("size:    32"), 11, "size:    64"),
       "the log's run has 64 sequences per step, the plan 32", 4},
      {LogFormat::kMegatron, megatron + "[Rank 9] (after 20 iterations) memory (MB) | allocated: 1.00 | max allocated: 2.00 | reserved: 3.00 | max reserved: 4.00\n",
       "rank 9 is outside the plan's 8 ranks", 0},
      {LogFormat::kMegatron, head + "[Rank 0] (after 10 iterations) memory (MB) | allocated: 1.00 | max allocated: 439135000000000000000000000000 | reserved: 3.00 | max reserved: 4.00\n",
       "after '| max allocated:' is 1 EiB or more", 4},
      {LogFormat::kDeepspeed, std::string(deepspeed).replace(deepspeed.find("MaxMemAllocated=38.88GB"), 23, "MaxMemAllocated=9e9GB"),
       "after 'MaxMemAllocated=' is 1 EiB or more", 3},
      {LogFormat::kTorchtitan, std::string(titan).replace(titan.find("memory: 58.03GiB"), 16, "memory: 1e300GiB"),
       "after 'memory: ' is 1 EiB or more", 3},
      {LogFormat::kPytorchHook, "{\"format\": \"meshplan-pytorch-hook/1\", \"rank\": 0, "
                                "\"world_size\": 8, \"device\": \"cpu\", \"step_times_s\": [1, -2], "
                                "\"max_memory_allocated\": null, \"max_memory_reserved\": null}",
       "expected a positive number of seconds, got -2", 1},
      {LogFormat::kPytorchHook, "{\"format\": \"meshplan-pytorch-hook/1\", \"step_times_s\": [NaN]}",
       "", 1},
      {LogFormat::kPytorchHook, TextOf(Data("torchtitan.log")), "", 1},
  };
  const PlanFile plan = LoadPlanFile(Data("megatron_plan.yaml"));
  const test::ScratchDir scratch("framework_log_hostile");
  int i = 0;
  for (const Case& c : cases) {
    const std::string path = scratch.Path("bad" + std::to_string(i++) + ".log");
    std::ofstream(path, std::ios::binary) << c.text;
    INFO(path << ": " << c.expect);
    const InputError e = ErrorOf([&] { ReadFrameworkLogs(c.format, {path}, RunShapeOf(plan)); });
    CHECK(e.where().file == path);
    CHECK_THAT(e.what(), Catch::Contains(c.expect));
    if (c.line > 0) CHECK(e.where().line == c.line);
  }
  const InputError warm = ErrorOf([&] {
    MeasurementOfRun(ReadFrameworkLogs(LogFormat::kMegatron, {Data("megatron.log")}, RunShapeOf(plan)),
                     plan, 6, "megatron.log");
  });
  CHECK_THAT(warm.what(), Catch::Contains("6 timing samples and the warm-up leaves out 6"));
}

// Mutations of the golden logs (bytes flipped, cut at any point, digits made junk, lines
// repeated): every parser answers with a run or an InputError, never another exception
// (tests/fuzz/fuzz_framework_log.cc fuzzes the same with libFuzzer).
TEST_CASE("mutated logs give a run or an InputError, never a crash", "[planner][framework_log][hostile]") {
  const RunShape shape{32, 4096, 8};
  const std::pair<const char*, LogFormat> files[] = {{"megatron.log", LogFormat::kMegatron},
                                                     {"torchtitan.log", LogFormat::kTorchtitan},
                                                     {"deepspeed.log", LogFormat::kDeepspeed},
                                                     {"pytorch_rank0.json", LogFormat::kPytorchHook}};
  const test::ScratchDir scratch("framework_log_mutations");
  uint64_t state = 12345;
  auto next = [&state](uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  const char junk[] = {'\0', '\x1b', '-', 'e', 'n', '|', ':', '9', ',', '\xff', ' ', '\n'};
  int refused = 0, read = 0;
  for (const auto& [name, format] : files) {
    const std::string original = TextOf(Data(name));
    for (int i = 0; i < 150; ++i) {
      std::string text = original;
      switch (next(4)) {
        case 0: text.resize(next(text.size())); break;  // cut short
        case 1:
          for (int k = 0; k < 4; ++k) text[next(text.size())] = junk[next(sizeof(junk))];
          break;
        case 2: text.insert(next(text.size()), text.substr(next(text.size()), 200)); break;
        default: text.erase(next(text.size()), next(40)); break;
      }
      const std::string path = scratch.Path("m.log");
      std::ofstream(path, std::ios::binary) << text;
      INFO(name << " mutation " << i);
      try {
        ReadFrameworkLogs(format, {path}, shape);
        ++read;
      } catch (const InputError& e) {
        CHECK(e.where().file == path);
        ++refused;
      }
    }
  }
  CHECK(refused > 50);  // the mutations do break logs
  CHECK(read > 50);     // and the parsers do not refuse everything
}

TEST_CASE("meshplan compare --log: the table under the framework, exit 0 / 1 / 2",
          "[planner][framework_log][cli]") {
  const std::string plan = Data("megatron_plan.yaml");
  const test::CliResult ok = test::RunMeshplan(
      "compare '" + plan + "' --log '" + Data("megatron.log") + "' --tolerance 1000");
  INFO(ok.output);
  CHECK(ok.exit_code == 0);
  CHECK_THAT(ok.output, Catch::Contains("megatron-core") && Catch::Contains("max reserved rank 5 (stage 1)") &&
                            Catch::Contains("1.831 s"));
  const test::CliResult tight = test::RunMeshplan(
      "compare '" + plan + "' --log '" + Data("megatron.log") + "' --tolerance 0");
  CHECK(tight.exit_code == 1);
  const test::CliResult wrong = test::RunMeshplan(
      "compare '" + plan + "' --log '" + Data("megatron.log") + "' --framework torchtitan");
  CHECK(wrong.exit_code == 2);
  CHECK_THAT(wrong.output, Catch::Contains("megatron.log") && Catch::Contains("looks like a megatron log"));
  const test::CliResult both = test::RunMeshplan(
      "compare '" + plan + "' '" + Data("pytorch_rank0.json") + "' --log '" + Data("megatron.log") + "'");
  CHECK(both.exit_code == 2);
  const test::CliResult json = test::RunMeshplan(
      "compare '" + Data("pytorch_plan.yaml") + "' --log '" + Data("pytorch_rank0.json") + "' '" +
      Data("pytorch_rank1.json") + "' --format json --tolerance 1000");
  CHECK(json.exit_code == 0);
  CHECK_THAT(json.output, Catch::Contains("\"framework\": \"pytorch"));
}

TEST_CASE("meshplan measurements --framework: one row per logged run of a folder",
          "[planner][framework_log][cli]") {
  const test::ScratchDir scratch("framework_log_rows");
  const std::string megatron = TextOf(Data("megatron.log"));
  scratch.Write("a.log", megatron);
  std::string slower = megatron;  // the same run, its first timed line twice as slow
  slower.replace(slower.find("1834.2"), 6, "3668.4");
  scratch.Write("b.log", slower);
  const std::string args = "measurements '" + scratch.dir.string() + "' --framework megatron-core --plan '" +
                           Data("megatron_plan.yaml") + "'";
  const test::CliResult table = test::RunMeshplan(args);
  INFO(table.output);
  CHECK(table.exit_code == 0);
  CHECK_THAT(table.output, Catch::Contains("a.log") && Catch::Contains("b.log") && Catch::Contains("2 plans"));
  const test::CliResult json = test::RunMeshplan(args + " --format json");
  CHECK(json.exit_code == 0);
  const nlohmann::json rows = nlohmann::json::parse(json.output);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["measured_step_s"].get<double>() == Approx(1.8315));
  CHECK(rows[1]["measured_step_s"].get<double>() == Approx(1.8315));  // the median is robust
  CHECK(rows[0]["measured_peak_bytes"].get<double>() == Approx(41876.25 * kMiB));
  CHECK(rows[0]["predicted_step_s"].get<double>() > 0);
  scratch.Write("c.log", "not a log\n");
  const test::CliResult bad = test::RunMeshplan(args);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("c.log") && Catch::Contains("no megatron timing line"));
}

}  // namespace
}  // namespace meshplan
