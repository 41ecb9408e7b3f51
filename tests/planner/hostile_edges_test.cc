// No silent wrong answers at the edges (docs/limits.md "Physical quantities", "Results",
// "Outputs", "Ambiguity", "Threads and the host"): one regression test per class of the
// hostile-input campaign that found them. Denormal rates and times, models past the shared
// limits from config.json and validate rows, special files as outputs, refused threads,
// ambiguous input: each ends in exit 2 with a located message, never in exit 0 with a
// figure that means nothing. CLI tests run under `timeout 20` (a hang fails).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "planner/atomic_file.h"
#include "planner/config/config_loader.h"
#include "planner/cost/cost_model.h"
#include "planner/figure_check.h"
#include "planner/input_file.h"
#include "planner/measure/measurement.h"
#include "planner/measure/sweep_table.h"
#include "planner/output_path.h"
#include "planner/validate/published_runs.h"
#include "tests/planner/test_util.h"

namespace meshplan {
namespace {

namespace fs = std::filesystem;
using test::ErrorOf;
using test::RunBounded;
using test::TempDir;

const std::string kConfigs = std::string(MESHPLAN_SOURCE_DIR) + "/configs";

// A one-node cluster file with its intra_node tier's bandwidth given as `bandwidth`.
std::string ClusterWithBandwidth(const std::string& bandwidth) {
  return "name: c\ngpu: a100-80gb\nnodes: 1\ngpus_per_node: 8\n"
         "intra_node: {name: nv, bandwidth_GBps: " + bandwidth + ", latency_us: 3}\n"
         "inter_node: {name: ib, bandwidth_GBps: 25, latency_us: 6}\n";
}

// configs/hardware/a100-80gb.yaml with `from` replaced by `to`.
std::string A100With(const std::string& from, const std::string& to) {
  std::string text = ReadInputFile(kConfigs + "/hardware/a100-80gb.yaml");
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

// A measured.json of one rank and one measured step, with the scalars given as text.
std::string Measured(const std::string& step_time, const std::string& median,
                     const std::string& tokens_per_s) {
  return R"({"environment": {"device": "cpu", "libtorch_version": "1.13", "hostname": "h",
  "world_size": 1, "intra_op_threads": 1, "model": "m", "plan": "dp=1", "precision": "fp32",
  "global_batch": 2, "seq_len": 8}, "first_step": 0, "steps": 1, "warmup_steps": 0,
  "tokens_per_step": 16, "step_times_s": [)" + step_time + R"(], "median_step_s": )" + median +
         R"(, "tokens_per_s": )" + tokens_per_s + R"(, "losses": [1.0], "peak_memory_bytes": [100],
  "ranks": [{"rank": 0, "first_step": 0, "step_times_s": [0.5], "losses": [1.0],
             "resident_bytes": 10, "peak_memory_bytes": 100, "phase_peaks": []}]})";
}

// A published runs file of one row of `figure` on `gpu` (precision `precision`), the row's
// model and published value given as text.
std::string PublishedRuns(const std::string& figure, const std::string& gpu,
                          const std::string& precision, const std::string& model,
                          const std::string& published) {
  return "tables:\n  - id: t\n    paper: p\n    source: s\n    page: x.md\n    figure: " + figure +
         "\n    common: {block: gpt, vocab_size: 51200, seq_len: 2048, tied_embeddings: true,\n"
         "             ffn_multiplier: 4, gpu: " + gpu + ", precision: " + precision + "}\n"
         "    rows:\n      - {name: r, " + model + ", gpus: 8, global_batch: 64,\n"
         "         plan: \"dp=8\", published: " + published + "}\n";
}
const std::string kRowModel = "heads: 16, hidden: 1024, layers: 4";

// ================================================================ 1. denormals

TEST_CASE("1. a denormal rate, peak, efficiency or memory in a hardware or cluster file is "
          "refused at its field", "[planner][hostile][edges]") {
  for (const char* value : {"1e-320", "1e-300", "0.0000001"}) {
    const InputError e = ErrorOf([&] { ClusterFromYamlText(ClusterWithBandwidth(value), "c.yaml"); });
    CHECK(e.field() == "intra_node.bandwidth_GBps");
    CHECK(e.where().line == 5);
    CHECK_THAT(e.message(), Catch::Contains("out of range"));
  }
  CHECK(ClusterFromYamlText(ClusterWithBandwidth("0.001"), "c.yaml").intra_node.bandwidth_Bps == 1e6);
  const struct {
    std::string from, to, field;
  } cases[] = {
      {"bf16: 312", "bf16: 1e-320", "peak_TFLOPs.bf16"},
      {"fp32: 19.5", "fp32: 4.9e-324", "peak_TFLOPs.fp32"},
      {"memory_bandwidth_TBps: 2.039", "memory_bandwidth_TBps: 1e-320", "memory_bandwidth_TBps"},
      {"memory_MiB: 81920", "memory_MiB: 1e-320", "memory_MiB"},
      {"optimizer_GBps: ", "optimizer_GBps: 1e-320 #", "host.optimizer_GBps"},
      {"bus_efficiency: 0.80", "bus_efficiency: 1e-320", "host.link.bus_efficiency"},
  };
  for (const auto& c : cases) {
    INFO(c.to);
    const std::string text = A100With(c.from, c.to);
    CHECK(ErrorOf([&] { GpuFromYamlText(text, "a100.yaml"); }).field() == c.field);
  }
  // fp8: 0 still means "none".
  CHECK(GpuFromYamlText(A100With("bf16: 312", "bf16: 312"), "a.yaml").peak_flops_fp8 == 0);
}

TEST_CASE("1. measured.json: denormal or negative step times, medians and tokens/s are refused",
          "[planner][hostile][edges]") {
  CHECK(MeasurementFromText(Measured("0.5", "0.5", "32"), "m.json").tokens_per_s == 32);
  const struct {
    std::string step, median, tokens, field;
  } cases[] = {
      {"1e-320", "0.5", "32", "step_times_s[0]"},
      {"-0.5", "0.5", "32", "step_times_s[0]"},
      {"0.5", "1e-320", "32", "median_step_s"},
      {"0.5", "-0.5", "32", "median_step_s"},
      {"0.5", "0", "32", "median_step_s"},  // a step was measured: its median is not 0
      {"0.5", "0.5", "1e-320", "tokens_per_s"},
      {"0.5", "0.5", "-32", "tokens_per_s"},
      {"0.5", "0.5", "1e308", "tokens_per_s"},
  };
  for (const auto& c : cases) {
    INFO(c.step << " " << c.median << " " << c.tokens);
    const InputError e =
        ErrorOf([&] { MeasurementFromText(Measured(c.step, c.median, c.tokens), "m.json"); });
    CHECK(e.field() == c.field);
    CHECK(e.where().line > 0);
  }
}

TEST_CASE("1. a sweep record whose MFU or times are out of range is refused",
          "[planner][hostile][edges]") {
  const std::string file = std::string(MESHPLAN_SOURCE_DIR) +
                           "/tests/data/sweep/tiny-fp32-s128-mbs2-none.json";
  const nlohmann::json good = nlohmann::json::parse(ReadInputFile(file));
  CHECK(SweepRowFromJson(good, file).measured_mfu < 1);
  nlohmann::json bad = good;
  bad["estimate"]["mfu"] = 1e308;
  CHECK(ErrorOf([&] { SweepRowFromJson(bad, file); }).field() == "estimate/mfu");
  // The record with its measured step time replaced.
  const auto with_step = [&](double seconds) {
    nlohmann::json record = good;
    for (auto& f : record["comparison"]["figures"])
      if (f["figure"].get<std::string>().rfind("step time", 0) == 0) f["measured"] = seconds;
    return record;
  };
  CHECK_THAT(ErrorOf([&] { SweepRowFromJson(with_step(1e-320), file); }).field(),
             Catch::EndsWith("/measured"));
  // 1 us is a possible step, but not for this record: its measured MFU would be ~1e5.
  CHECK_THAT(ErrorOf([&] { SweepRowFromJson(with_step(1e-6), file); }).message(),
             Catch::Contains("MFU"));
}

TEST_CASE("1. CheckFigures: a non-finite or negative figure is a bug (FigureError), a real "
          "one passes", "[planner][hostile][edges]") {
  PlanFile setup;
  setup.model = LoadModel("llama2-7b");
  setup.cluster = LoadCluster("8xH100");
  setup.training.global_batch = 64;
  setup.training.seq_len = 4096;
  setup.plan = ParsePlanString("dp=8");
  PlanCost cost = Estimate(setup.model, setup.cluster, setup.training, setup.plan);
  CHECK_NOTHROW(CheckFigures(cost, DescribeInputs(setup)));
  for (double bad : {std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN(), -1.0}) {
    PlanCost broken = cost;
    broken.time.total_s = bad;
    try {
      CheckFigures(broken, DescribeInputs(setup));
      FAIL("expected a FigureError");
    } catch (const FigureError& e) {
      CHECK_THAT(e.what(), Catch::Contains("step time") && Catch::Contains("llama2-7b") &&
                               Catch::Contains("dp=8"));
    }
  }
}

TEST_CASE("1. CLI: a cluster of 1e-320 GB/s exits 2 in estimate, search and simulate, never 0 "
          "with inf", "[planner][hostile][edges][cli]") {
  TempDir dir;
  const std::string cluster = dir.Write("c.yaml", ClusterWithBandwidth("1e-320"));
  for (const std::string command :
       {"estimate --plan dp=8", "search --top 1", "simulate --plan dp=8"}) {
    INFO(command);
    const auto r = RunBounded(command + " --cluster " + cluster);
    CHECK(r.result.exit_code == 2);
    CHECK_THAT(r.result.output, Catch::Contains("c.yaml:5:") &&
                                    Catch::Contains("intra_node.bandwidth_GBps"));
    CHECK_THAT(r.result.output, !Catch::Contains("inf") && !Catch::Contains("nan"));
  }
}

// ================================================================ 2. shared limits everywhere

TEST_CASE("2. config.json takes the shared limits of every model: layers, vocab, widths, "
          "experts", "[planner][hostile][edges]") {
  const auto llama = [](const std::string& extra) {
    return R"({"model_type": "llama", "hidden_size": 1024, "intermediate_size": 4096,
    "num_attention_heads": 8, "num_hidden_layers": 2, "vocab_size": 1000)" + extra + "}";
  };
  const auto field_of = [](const std::string& text) {
    return ErrorOf([&] { HfConfigFromText(text, "config.json"); });
  };
  // A key given twice would be refused as such: replace the value instead.
  const auto with = [&](const std::string& key, const std::string& value) {
    std::string text = llama("");
    const size_t at = text.find("\"" + key + "\": ");
    REQUIRE(at != std::string::npos);
    const size_t begin = at + key.size() + 4, end = text.find_first_of(",}", begin);
    return text.replace(begin, end - begin, value);
  };
  CHECK(field_of(with("num_hidden_layers", "10000000")).field() == "num_hidden_layers");
  CHECK(field_of(with("vocab_size", "1099511627776")).field() == "vocab_size");
  CHECK(field_of(with("intermediate_size", "1000000000")).field() == "intermediate_size");
  CHECK(field_of(with("num_attention_heads", "10000000")).field() == "num_attention_heads");
  const InputError head_dim = field_of(llama(R"(, "head_dim": 1000000000)"));
  CHECK(head_dim.field() == "head_dim");
  CHECK(head_dim.where().line > 0);
  CHECK_THAT(head_dim.message(), Catch::Contains("docs/limits.md"));
  const std::string mixtral =
      R"({"model_type": "mixtral", "hidden_size": 1024, "intermediate_size": 4096,
      "num_attention_heads": 8, "num_hidden_layers": 2, "vocab_size": 1000,
      "num_local_experts": 10000000, "num_experts_per_tok": 2})";
  CHECK(field_of(mixtral).field() == "num_local_experts");
}

TEST_CASE("2. validate rows take the shared limits and estimate's precision check",
          "[planner][hostile][edges]") {
  TempDir dir;
  const auto load = [&](const std::string& text) {
    return LoadPublishedRuns(dir.Write("runs.yaml", text));
  };
  CHECK(load(PublishedRuns("tflops_per_gpu", "a100-80gb", "mixed", kRowModel, "100"))
            .tables.front().rows.size() == 1);
  // 1e15 parameters: refused before any count could overflow int64.
  const InputError huge = ErrorOf([&] {
    load(PublishedRuns("tflops_per_gpu", "a100-80gb", "mixed",
                       "heads: 16, hidden: 10000000, layers: 100000", "100"));
  });
  CHECK_THAT(huge.message(), Catch::Contains("parameters"));
  CHECK(huge.where().line == 10);  // the row
  CHECK(ErrorOf([&] {
          load(PublishedRuns("tflops_per_gpu", "a100-80gb", "mixed",
                             "heads: 16, hidden: 1024, layers: 10000000", "100"));
        }).field() == "tables[0].rows[0].layers");
  // fp8 on an A100 (no FP8 tensor cores): refused as estimate refuses it.
  const InputError fp8 = ErrorOf(
      [&] { load(PublishedRuns("tflops_per_gpu", "a100-80gb", "fp8", kRowModel, "100")); });
  CHECK(fp8.field() == "tables[0].common.precision");
  CHECK_THAT(fp8.message(), Catch::Contains("FP8 tensor cores"));
  CHECK_NOTHROW(load(PublishedRuns("tflops_per_gpu", "h100-sxm", "fp8", kRowModel, "100")));
  // A published value below its quantity's bound.
  for (const char* figure :
       {"tflops_per_gpu", "step_time_s", "activation_GiB", "tokens_per_s_per_gpu"}) {
    INFO(figure);
    CHECK(ErrorOf([&] {
            load(PublishedRuns(figure, "a100-80gb", "mixed", kRowModel, "1e-320"));
          }).field() == "tables[0].rows[0].published");
  }
}

// ================================================================ 3. output paths

TEST_CASE("3. CheckOutputPath: only a new path or a regular file, AtomicFileWriter refuses the "
          "rest without touching it", "[planner][hostile][edges][files]") {
  TempDir dir;
  const std::string fifo = (dir.path / "fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  fs::create_directory(dir.path / "sub");
  fs::create_directory_symlink(dir.path / "sub", dir.path / "link");
  const std::string regular = dir.Write("plan.yaml", "old");
  CHECK_NOTHROW(CheckOutputPath(regular, "--out"));
  CHECK_NOTHROW(CheckOutputPath((dir.path / "new.yaml").string(), "--out"));
  CHECK_THAT(ErrorOf([&] { CheckOutputPath("", "--out"); }).message(),
             Catch::Contains("empty path"));
  CHECK_THAT(ErrorOf([&] { CheckOutputPath(fifo, "--out"); }).message(), Catch::Contains("FIFO"));
  CHECK_THAT(ErrorOf([&] { CheckOutputPath("/dev/null", "--out"); }).message(),
             Catch::Contains("character device"));
  CHECK_THAT(ErrorOf([&] { CheckOutputPath((dir.path / "link").string(), "--out"); }).message(),
             Catch::Contains("directory"));
  CHECK(ErrorOf([&] { CheckOutputPath(fifo, "--trace"); }).field() == "--trace");

  CHECK_THAT(ErrorOf([&] { WriteFileAtomically(fifo, "x"); }).what(), Catch::Contains("FIFO"));
  CHECK(fs::is_fifo(fifo));
  CHECK(fs::is_directory(dir.path / "link"));
  // A write that fails (no such folder) is an InputError at the path, exit 2.
  const InputError missing =
      ErrorOf([&] { WriteFileAtomically((dir.path / "no" / "x.yaml").string(), "x"); });
  CHECK_THAT(missing.where().file, Catch::EndsWith("x.yaml"));
  WriteFileAtomically(regular, "new");
  CHECK(ReadInputFile(regular) == "new");

  CHECK_THAT(ErrorOf([&] {
               CheckDistinctOutputs({{"--out", regular}, {"--dump", (dir.path / "." / "plan.yaml").string()}});
             }).message(),
             Catch::Contains("also the file of --out"));
  CHECK_NOTHROW(CheckDistinctOutputs({{"--out", regular}, {"--dump", ""}}));
}

TEST_CASE("3. CLI: --out, --dump and --trace refuse FIFOs, devices, directories, one shared "
          "path and empty paths, at once and untouched", "[planner][hostile][edges][cli]") {
  TempDir dir;
  const std::string fifo = (dir.path / "fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  fs::create_directory(dir.path / "sub");
  fs::create_directory_symlink(dir.path / "sub", dir.path / "link");
  const std::string link = (dir.path / "link").string();
  const std::string same = (dir.path / "same.csv").string();
  const std::string search = "search --global-batch 8 --seq 512 --top 1 ";
  const struct {
    std::string args, flag;
  } cases[] = {
      {search + "--out " + fifo, "--out"},
      {search + "--out " + link, "--out"},
      {search + "--out /dev/null", "--out"},
      {search + "--out ''", "--out"},
      {search + "--dump ''", "--dump"},
      {search + "--dump " + (dir.path / "sub").string(), "--dump"},
      {search + "--dump " + fifo, "--dump"},
      {search + "--out " + same + " --dump " + same, "--dump"},
      {search + "--explain-plan ''", "--explain-plan"},
      {"simulate --plan dp=8 --global-batch 8 --seq 512 --trace " + fifo, "--trace"},
      {"simulate --plan dp=8 --global-batch 8 --seq 512 --trace ''", "--trace"},
      {"validate --table ''", "--table"},
  };
  for (const auto& c : cases) {
    INFO(c.args);
    const auto r = RunBounded(c.args);
    CHECK(r.result.exit_code == 2);
    CHECK_THAT(r.result.output, Catch::Contains(c.flag));
    CHECK(r.seconds < 15);
  }
  CHECK(fs::is_fifo(fifo));
  CHECK(fs::is_symlink(link));
  CHECK(fs::is_empty(dir.path / "sub"));
  CHECK(!fs::exists(same));
}

TEST_CASE("3. CLI: simulate --trace writes through a temporary, renamed whole",
          "[planner][hostile][edges][cli]") {
  TempDir dir;
  const std::string trace = dir.Write("trace.json", "old");
  const auto r = RunBounded("simulate --plan dp=8 --global-batch 8 --seq 512 --trace " + trace);
  REQUIRE(r.result.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(ReadInputFile(trace));
  CHECK(j.contains("traceEvents"));
  for (const auto& entry : fs::directory_iterator(dir.path))  // no temporary left behind
    CHECK_THAT(entry.path().filename().string(), !Catch::Contains(".tmp."));
}

// ================================================================ 4. threads

TEST_CASE("4. CLI: search --threads 512 under an address-space cap runs on the threads it "
          "gets, never aborts", "[planner][hostile][edges][cli]") {
  // 2.5 GB: room for the search, not for 512 stacks of 8 MiB.
  const test::CliResult r = test::RunShell(
      "bash -c \"ulimit -v 2500000; exec timeout 60 '" + std::string(MESHPLAN_BINARY) +
      "' search --global-batch 8 --seq 512 --top 1 --threads 512 --format json\" 2>&1");
  INFO(r.output.substr(0, 2000));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, !Catch::Contains("terminate called"));
  const size_t brace = r.output.find('{');
  REQUIRE(brace != std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(r.output.substr(brace));
  CHECK(j["threads"].get<int>() >= 1);
}

// ================================================================ 5. input at fault: exit 2

TEST_CASE("5. CLI: --dump into a directory path exits 2 naming --dump, not 1",
          "[planner][hostile][edges][cli]") {
  TempDir dir;
  const auto r = RunBounded("search --global-batch 8 --seq 512 --top 1 --dump " +
                            (dir.path / "missing" / "x.csv").string());
  CHECK(r.result.exit_code == 2);
  CHECK_THAT(r.result.output, Catch::Contains("--dump") && !Catch::Contains("unexpected"));
}

// ================================================================ 7. ambiguity

TEST_CASE("7. a second YAML document, even malformed, and a NUL byte are refused",
          "[planner][hostile][edges]") {
  const std::string model = ReadInputFile(kConfigs + "/models/llama2-7b.yaml");
  for (const std::string tail : {"---\nhidden: 8\n", "...\n---\n[[[\n", "---\n"}) {
    INFO(tail);
    const InputError e = ErrorOf([&] { ModelFromYamlText(model + tail, "m.yaml"); });
    CHECK(e.where().line > 1);
  }
  CHECK_THAT(ErrorOf([&] { ModelFromYamlText(model + std::string("\0x: 1\n", 6), "m.yaml"); })
                 .message(),
             Catch::Contains("NUL"));
  const std::string config = R"({"model_type": "llama", "hidden_size": 1024,
    "intermediate_size": 4096, "num_attention_heads": 8, "num_hidden_layers": 2,
    "vocab_size": 1000})";
  const InputError nul =
      ErrorOf([&] { HfConfigFromText(config + std::string("\0{\"x\": 1}", 10), "c.json"); });
  CHECK(nul.where().line == 3);
  CHECK_THAT(nul.message(), Catch::Contains("NUL"));
  CHECK_THAT(ErrorOf([&] {
               MeasurementFromText(Measured("0.5", "0.5", "32") + std::string("\0junk", 5), "m");
             }).message(),
             Catch::Contains("NUL"));
}

TEST_CASE("7. CLI: decimal flags refuse hex and empty values, an unknown command is named",
          "[planner][hostile][edges][cli]") {
  const struct {
    std::string args, expected;
  } cases[] = {
      {"estimate --headroom ''", "--headroom"},
      {"estimate --headroom 0x0.1", "--headroom"},
      {"search --headroom 0x0p0", "--headroom"},
      {"compare a b --tolerance 0x10", "--tolerance"},
      {"compare a b --tolerance ''", "--tolerance"},
      {"search --threads 0x10", "--threads"},
      {"frobnicate", "frobnicate"},
      {"frobnicate --model x", "frobnicate"},
  };
  for (const auto& c : cases) {
    INFO(c.args);
    const auto r = RunBounded(c.args);
    CHECK(r.result.exit_code == 2);
    CHECK_THAT(r.result.output, Catch::Contains(c.expected));
  }
  CHECK_THAT(RunBounded("frobnicate").result.output, Catch::Contains("estimate"));
  CHECK(RunBounded("estimate --headroom 0.1").result.exit_code == 0);
}

}  // namespace
}  // namespace meshplan
