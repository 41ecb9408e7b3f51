// `meshplan simulate` and `meshplan search --simulate-top` end to end: runs the built
// binary, parses its JSON, checks the trace file and the exit codes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli_run.h"

namespace meshplan {
namespace {

using Result = test::CliResult;

Result RunCli(const std::string& args) { return test::RunMeshplan(args); }

TEST_CASE("simulate --format json puts the analytic and the simulated step side by side",
          "[simulator][cli]") {
  const std::string trace = std::string(MESHPLAN_BINARY) + ".simulate_cli_test.json";
  const Result r = RunCli(
      "simulate --format json --model llama2-7b --cluster 16xH100 --plan "
      "dp=2,tp=4,pp=2,sp=1,zero=1,schedule=interleaved,vpp=2 --global-batch 16 --seq 4096 "
      "--trace '" + trace + "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.output);
  const nlohmann::json& sim = j["simulated"];
  CHECK(j["analytic"]["step_time_s"].get<double>() > 0);
  const double step = sim["step_time_s"].get<double>();
  CHECK(step > 0);
  CHECK(sim["time"]["total_s"].get<double>() == step);
  CHECK(sim["tokens_per_s"].get<double>() * step == Approx(16.0 * 4096));
  // Within a few percent of the analytic estimate for this ordinary plan.
  CHECK(step == Approx(j["analytic"]["step_time_s"].get<double>()).epsilon(0.1));
  REQUIRE(sim["stages"].size() == 2);
  for (const nlohmann::json& stage : sim["stages"]) {
    // Each stream's share of the step is its busy time over the step time.
    for (const char* stream : {"compute", "dp", "pp", "cp", "tp"})
      CHECK(stage["streams"][stream]["utilisation"].get<double>() ==
            Approx(stage["streams"][stream]["busy_s"].get<double>() / step));
    CHECK(stage["streams"]["compute"]["utilisation"].get<double>() > 0.5);
  }
  CHECK(sim["stages"][1]["rank"] == 4);  // stage 1 starts at rank tp * cp
  std::ifstream in(trace);
  REQUIRE(in);
  const nlohmann::json events = nlohmann::json::parse(in)["traceEvents"];
  CHECK(events.size() > 100);
  std::remove(trace.c_str());
}

TEST_CASE("simulate prints analytic and simulated columns", "[simulator][cli]") {
  const Result r = RunCli("simulate --model tiny-llama --cluster 2xH100 --plan tp=2 "
                          "--global-batch 4 --seq 256");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("analytic") != std::string::npos);
  CHECK(r.output.find("simulated") != std::string::npos);
  CHECK(r.output.find("exposed tp communication") != std::string::npos);
}

TEST_CASE("simulate rejects a bad plan with exit code 2", "[simulator][cli]") {
  const Result r = RunCli("simulate --model llama2-7b --cluster 8xH100 --plan dp=3,tp=4");
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("world_size") != std::string::npos);
}

TEST_CASE("simulate names the offloads it does not draw, a re-ranking keeps their analytic time",
          "[simulator][cli][offload]") {
  // meshplan's executor offloads any combination (megatron-core offers activations only).
  const std::string setup =
      "--model llama2-7b --cluster 8xH100 --global-batch 16 --seq 4096 --framework meshplan ";
  const Result json = RunCli("simulate --format json " + setup + "--plan dp=8,zero=1,offload_opt=1");
  INFO(json.output);
  REQUIRE(json.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(json.output);
  CHECK(j["simulated"]["not_simulated"] == nlohmann::json::array({"offload_opt=1"}));
  const Result plain = RunCli("simulate --format json " + setup + "--plan dp=8,zero=1");
  REQUIRE(plain.exit_code == 0);
  CHECK(nlohmann::json::parse(plain.output)["simulated"]["not_simulated"].empty());
  const Result text = RunCli("simulate " + setup + "--plan dp=8,zero=1,offload_act=1");
  INFO(text.output);
  REQUIRE(text.exit_code == 0);
  CHECK(text.output.find("not simulated: offload_act=1") != std::string::npos);
  CHECK(text.output.find("offload copies") != std::string::npos);

  // Every candidate pinned to offload_opt: the re-ranked list is the analytic one.
  const Result ranked = RunCli("search --format json " + setup +
                               "--only offload_opt=1 --top 3 --simulate-top 3 --threads 1");
  INFO(ranked.output);
  REQUIRE(ranked.exit_code == 0);
  const nlohmann::json r = nlohmann::json::parse(ranked.output);
  REQUIRE(r["simulated"].size() == 3);
  for (const nlohmann::json& p : r["simulated"]) {
    CHECK(p["not_simulated"] == nlohmann::json::array({"offload_opt=1"}));
    CHECK(p["simulated_step_s"] == p["analytic_step_s"]);
  }
}

TEST_CASE("search --simulate-top K re-ranks the best K plans by simulated step time",
          "[simulator][cli]") {
  const Result r = RunCli("search --format json --model llama2-7b --cluster 16xH100 "
                          "--global-batch 64 --seq 4096 --top 2 --simulate-top 5 --threads 1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.output);
  const nlohmann::json& sim = j["simulated"];
  REQUIRE(sim.size() == 5);
  std::vector<int> analytic_ranks;
  for (size_t i = 0; i < sim.size(); ++i) {
    CHECK(sim[i]["rank"] == i + 1);
    if (i > 0)
      CHECK(sim[i]["simulated_step_s"].get<double>() >= sim[i - 1]["simulated_step_s"].get<double>());
    analytic_ranks.push_back(sim[i]["analytic_rank"]);
    // The analytic step of the plan it names is the search's.
    const int a = sim[i]["analytic_rank"];
    CHECK(sim[i]["plan"] == j["top"][a - 1]["plan"]);
  }
  std::sort(analytic_ranks.begin(), analytic_ranks.end());
  CHECK(analytic_ranks == std::vector<int>{1, 2, 3, 4, 5});
}

TEST_CASE("simulate's table shows one stage on both sides, the trace keeps what is asked and "
          "states its size", "[simulator][cli][trace]") {
  const std::string trace = std::string(MESHPLAN_BINARY) + ".simulate_cli_filter.json";
  const std::string setup =
      "simulate --model llama2-7b --cluster 16xH100 --global-batch 16 --seq 4096 "
      "--plan dp=2,tp=4,pp=2,sp=1 ";
  const Result json = RunCli(setup + "--format json --trace '" + trace +
                             "' --trace-microbatches 2 --trace-stages 1");
  INFO(json.output);
  REQUIRE(json.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(json.output);
  std::ifstream in(trace);
  REQUIRE(in);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(j["trace"]["bytes"].get<int64_t>() == static_cast<int64_t>(text.size()));
  int complete = 0;
  const nlohmann::json written = nlohmann::json::parse(text);
  for (const nlohmann::json& e : written["traceEvents"]) {
    CHECK(e["pid"] == 1);  // stage 1 only, metadata included
    if (e["ph"] != "X") continue;
    ++complete;
    CHECK(e["args"]["microbatch"].get<int>() < 2);
  }
  CHECK(complete == j["trace"]["events"].get<int>());
  CHECK(complete > 10);
  CHECK(complete < j["simulated"]["ops"].get<int>() / 4);  // 2 of 16 micro-batches, 1 of 2 stages
  std::remove(trace.c_str());

  // The table's simulated column is one stage's: by default the one with the most work.
  const int most = j["simulated"]["stage_with_most_work"];
  for (int stage : {0, 1}) {
    const Result table = RunCli(setup + "--stage " + std::to_string(stage));
    INFO(table.output);
    REQUIRE(table.exit_code == 0);
    const std::string header = "step time, stage " + std::to_string(stage) + "*";
    CHECK(table.output.find(header) != std::string::npos);
    CHECK((table.output.find("the stage with the most work") != std::string::npos) ==
          (stage == most));
  }
  const Result plain = RunCli(setup);
  CHECK(plain.output.find("step time, stage " + std::to_string(most) + "*") != std::string::npos);
}

TEST_CASE("simulate refuses stages the plan lacks and trace filters without a trace",
          "[simulator][cli][trace]") {
  const std::string setup = "simulate --model llama2-7b --cluster 8xH100 --plan dp=4,pp=2 ";
  for (const std::string& flags : {std::string("--stage 2"), std::string("--stage -1"),
                                   std::string("--trace-stages 0,5 --trace x.json"),
                                   std::string("--trace-stages 0"),
                                   std::string("--trace-microbatches 2"),
                                   std::string("--trace-microbatches 0 --trace x.json")}) {
    const Result r = RunCli(setup + flags);
    INFO(flags << "\n" << r.output);
    CHECK(r.exit_code == 2);
    CHECK((r.output.find("--stage") != std::string::npos ||
           r.output.find("--trace") != std::string::npos));
  }
}

}  // namespace
}  // namespace meshplan
