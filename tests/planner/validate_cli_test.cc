// `meshplan validate` end to end: every published row and every table's MAPE, in the table
// and in JSON; exit 0 whatever the errors (it reports), 2 on bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "planner/validate/published_runs.h"
#include "tests/cli_run.h"
#include "tests/planner/test_util.h"

namespace meshplan {
namespace {

using Result = test::CliResult;

// Every row name of configs/validation/published_runs.yaml.
const char* const kNarayananRows[] = {"1.7B",   "3.6B",   "7.5B",   "18.4B",  "39.1B",
                                      "76.1B",  "145.6B", "310.1B", "529.6B", "1008.0B"};
const char* const kKorthikantiModels[] = {"22B", "175B", "530B", "1T"};

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_CASE("validate prints every published row and the MAPE per table",
          "[planner][cli][validation]") {
  const Result r = test::RunMeshplan("validate");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  for (const char* row : kNarayananRows)
    CHECK(Count(r.output, std::string("  ") + row + " ") == 1);
  for (const char* model : kKorthikantiModels) {
    const std::string m(model);
    CHECK(Count(r.output, "  " + m + " full recompute ") == 1);
    CHECK(Count(r.output, "  " + m + " no recompute ") == 1);
    CHECK(Count(r.output, "  " + m + " seq+selective ") == 2);  // time and memory
  }
  for (const char* row : {"GPT3-5B", "GPT3-175B 512 GPUs", "LLAMA2-70B", "LLAMA3-8B CP2",
                          "Nemotron-8B", "Nemotron-340B", "Llama 3 70B full",
                          "Llama 2 13B none", "Llama 2 70B full"})
    CHECK(Count(r.output, std::string("  ") + row + " ") == 1);
  // Rows meshplan cannot model yet are listed with their reason.
  CHECK(Count(r.output, "  skipped: Nemotron-") == 0);  // squared-ReLU FFNs are modelled
  CHECK(Count(r.output, "  skipped: Llama ") == 0);  // op and every:2 are modelled
  CHECK(Count(r.output, "  Llama 2 70B selective op local batch 2 ") == 1);
  CHECK(Count(r.output, "  skipped: 8 GPUs FSDP + torch.compile") == 2);  // and + Float8
  CHECK(Count(r.output, "MAPE ") == 6);
  CHECK(Count(r.output, "max |error| ") == 6);
  CHECK(Count(r.output, "  fit: ") == 6);
  for (const char* id :
       {"narayanan2021-table1", "korthikanti2022-table5", "korthikanti2022-figure1",
        "nemo2407-dgxh100-fp8", "torchtitan2024-a100-fsdp2", "torchtitan2024-h100-fsdp"})
    CHECK(r.output.find(id) != std::string::npos);
  for (const char* framework :
       {"megatron-lm-2021", "megatron-lm-2022", "nemo", "torchtitan-2024-04", "torchtitan"})
    CHECK(r.output.find(std::string("framework: ") + framework) != std::string::npos);
  for (const char* heading : {"predicted", "published", "error", "arXiv:2104.04473",
                              "arXiv:2205.05198"})
    CHECK(r.output.find(heading) != std::string::npos);
}

TEST_CASE("validate --format json: rows, errors and MAPEs", "[planner][cli][validation]") {
  const Result r = test::RunMeshplan("validate --format json", /*with_stderr=*/false);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.output);
  REQUIRE(j["tables"].size() == 6);
  const size_t sizes[] = {10, 8, 8, 12, 10, 2}, skipped[] = {0, 0, 0, 0, 0, 4};
  const char* units[] = {"TFLOP/s per GPU", "s", "GiB", "tokens/s per GPU", "tokens/s per GPU",
                         "tokens/s per GPU"};
  for (size_t i = 0; i < 6; ++i) {
    const nlohmann::json& t = j["tables"][i];
    CAPTURE(t["id"]);
    REQUIRE(t["rows"].size() == sizes[i]);
    CHECK(t["skipped"].size() == skipped[i]);
    for (const nlohmann::json& s : t["skipped"]) CHECK(!s["reason"].get<std::string>().empty());
    CHECK(t["unit"] == units[i]);
    CHECK(t["framework"].is_string());
    int64_t disagreements = 0, tight = 0;
    double sum = 0, worst = 0;
    int64_t figures = 0;
    for (const nlohmann::json& row : t["rows"]) {
      disagreements += !row["fit_tight"].get<bool>() && row["fits"] != row["published_fits"];
      tight += row["fit_tight"].get<bool>();
      if (row["published"].is_null()) continue;  // ran out of memory: no figure
      ++figures;
      const double predicted = row["predicted"], published = row["published"];
      const double error = row["error_pct"];
      CHECK(predicted > 0);
      CHECK(error == Approx((predicted - published) / published * 100));
      CHECK(row["step_time_s"].get<double>() > 0);
      CHECK(row["time"].contains("bubble_s"));
      CHECK(row["plan"].is_string());
      sum += std::abs(error);
      worst = std::max(worst, std::abs(error));
    }
    CHECK(t["mape_pct"].get<double>() == Approx(sum / double(figures)));
    CHECK(t["max_abs_error_pct"].get<double>() == Approx(worst));
    CHECK(t["fit_disagreements"] == disagreements);
    CHECK(t["tight_fits"] == tight);
    CHECK(t["worst_row"].is_string());
  }
}

TEST_CASE("validate --table, --help and bad input", "[planner][cli][validation]") {
  const Result one = test::RunMeshplan("validate --table korthikanti2022-figure1");
  INFO(one.output);
  CHECK(one.exit_code == 0);
  CHECK(Count(one.output, "MAPE ") == 1);
  CHECK(one.output.find("1.7B") == std::string::npos);

  CHECK(test::RunMeshplan("--help").output.find("  validate") != std::string::npos);
  const Result help = test::RunMeshplan("validate --help");
  CHECK(help.exit_code == 0);
  CHECK(help.output.find("--runs") != std::string::npos);
  CHECK(help.output.find("--format") != std::string::npos);
  // --table's help names every table of the shipped file (its list is written by hand).
  for (const PublishedTable& table : LoadPublishedRuns(DefaultPublishedRunsPath()).tables) {
    INFO(table.id);
    CHECK(help.output.find(table.id) != std::string::npos);
  }

  const Result unknown = test::RunMeshplan("validate --table nope");
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.output.find("narayanan2021-table1") != std::string::npos);  // lists the ids
  CHECK(test::RunMeshplan("validate --runs /nonexistent/runs.yaml").exit_code == 2);
  // A hostile table: exit 2 with its file, line and field.
  test::TempDir dir;
  const std::string runs = dir.Write("runs.yaml",
                                     "tables:\n"
                                     "  - id: t\n"
                                     "    paper: p\n"
                                     "    source: s\n"
                                     "    page: x.md\n"
                                     "    framework: paxml\n");
  const Result hostile = test::RunMeshplan("validate --runs " + runs);
  CHECK(hostile.exit_code == 2);
  CHECK(hostile.output.find(runs + ":6:") != std::string::npos);
  CHECK(hostile.output.find("tables[0].framework") != std::string::npos);
  CHECK(hostile.output.find("megatron-core") != std::string::npos);
  CHECK(test::RunMeshplan("validate --format csv").exit_code == 2);
}

TEST_CASE("validate --framework predicts every row under another profile",
          "[planner][cli][validation][framework]") {
  const Result core = test::RunMeshplan("validate --table korthikanti2022-table5 --framework megatron-core");
  INFO(core.output);
  REQUIRE(core.exit_code == 0);
  CHECK(core.output.find("framework: megatron-core") != std::string::npos);
  CHECK(Count(core.output, "  skipped: ") == 0);
  // Megatron-LM 2021 had no selective recompute and no sequence parallelism: the rows that
  // use both are listed, with both rules, not predicted.
  const Result old = test::RunMeshplan("validate --table korthikanti2022-table5 --framework megatron-lm-2021");
  REQUIRE(old.exit_code == 0);
  CHECK(Count(old.output, "  skipped: ") == 4);
  CHECK(Count(old.output, "[recompute_offered]") == 4);
  CHECK(Count(old.output, "[sp_offered]") == 4);
  // Plans the profile does not run are listed with the rule they break, not predicted.
  const Result ds = test::RunMeshplan("validate --table nemo2407-dgxh100-fp8 --framework deepspeed");
  INFO(ds.output);
  REQUIRE(ds.exit_code == 0);
  CHECK(ds.output.find("skipped: LLAMA3-8B CP2 (dp=4,cp=2,zero=1,mbs=1; published 12036): cp=2: "
                      "deepspeed 0.14 runs no context parallelism; allowed: cp=1 "
                      "[parallelism_offered]") != std::string::npos);
  CHECK(Count(ds.output, "[schedule_offered]") == 7);  // the interleaved rows
  CHECK(ds.output.find("  LLAMA2-7B ") != std::string::npos);  // dp=8,zero=1: DeepSpeed runs it
  const Result bad = test::RunMeshplan("validate --framework jax");
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find("unknown framework 'jax'") != std::string::npos);
}

}  // namespace
}  // namespace meshplan
