// `meshplan search` end to end: runs the built binary, checks its table, its JSON,
// --out, --explain, exit codes 0 / 2 / 3 and determinism across --threads.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "planner/config/config_loader.h"
#include "tests/cli_run.h"

namespace meshplan {
namespace {

using test::CliResult;

CliResult RunSearch(const std::string& args, bool with_stderr = true) {
  return test::RunMeshplan("search " + args, with_stderr);
}

nlohmann::json RunJson(const std::string& args, int expected_exit = 0) {
  const CliResult r = RunSearch("--format json " + args, /*with_stderr=*/false);
  INFO(r.output);
  REQUIRE(r.exit_code == expected_exit);
  return nlohmann::json::parse(r.output);
}

const char* kStory1 = "--model spec-7b --cluster 1xA40 --global-batch 1 --seq 256 --precision bf16";

TEST_CASE("search with no arguments ranks plans for the default setup and hints",
          "[planner][cli][search]") {
  const CliResult r = RunSearch("");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  for (const char* text : {"llama2-7b on 8xH100", "rank", "memory/GPU", "tokens/s", "MFU",
                           "compute", "bubble", "\n   1  ", "Next:", "--explain"})
    CHECK_THAT(r.output, Catch::Contains(text));
}

TEST_CASE("search --format json: counts, top plans with their cost, explain, pareto",
          "[planner][cli][search]") {
  const nlohmann::json j = RunJson("--model llama2-7b --cluster 16xH100 --global-batch 128 --top 7");
  CHECK(j["setup"]["gpus"] == 16);
  const int64_t candidates = j["candidates"], valid = j["valid"], fitting = j["fitting"];
  const int64_t variants = j["variants"];
  CHECK(candidates > valid);
  CHECK(valid + variants >= fitting);
  CHECK(fitting > 0);
  CHECK(j["evaluated"] == valid + variants);
  CHECK(j["wall_s"].get<double>() > 0);
  int64_t removed = 0;
  for (const auto& c : j["explain"]["constraints"]) removed += c["removed"].get<int64_t>();
  CHECK(removed + valid == candidates);
  CHECK(j["explain"]["memory_limit"].get<int64_t>() +
            j["explain"]["host_memory_exceeded"].get<int64_t>() ==
        valid + variants - fitting);
  REQUIRE(j["top"].size() == 7);
  const double usable = j["setup"]["usable_bytes"];
  double previous = 1e300;
  for (const auto& t : j["top"]) {
    CHECK(t["cost"]["fits"] == true);
    CHECK(t["cost"]["memory"]["total_bytes"].get<double>() <= usable);
    CHECK(t["cost"]["tokens_per_s"].get<double>() <= previous);
    previous = t["cost"]["tokens_per_s"];
    CHECK(t["fields"]["dp"].get<int64_t>() * t["fields"]["tp"].get<int64_t>() *
              t["fields"]["pp"].get<int64_t>() * t["fields"]["cp"].get<int64_t>() ==
          16);
  }
  CHECK(j["top"][0]["rank"] == 1);
  CHECK(j["pareto"].size() >= 1);
}

TEST_CASE("search --out writes a plan file that LoadPlanFile reads back", "[planner][cli][search]") {
  const std::filesystem::path out = std::filesystem::temp_directory_path() /
                                    ("meshplan_search_out_" + std::to_string(getpid()) + ".yaml");
  const nlohmann::json j =
      RunJson("--model llama2-7b --cluster 16xH100 --global-batch 128 --out '" + out.string() + "'");
  const PlanFile file = LoadPlanFile(out.string());
  CHECK(ToPlanString(file.plan) == j["top"][0]["plan"].get<std::string>());
  CHECK(file.model.name == "llama2-7b");
  CHECK(file.cluster.world_size() == 16);
  CHECK(file.training.global_batch == 128);
  CHECK(file.training.seq_len == 4096);
  std::filesystem::remove(out);
}

TEST_CASE("search output is the same with 1 and 2 threads", "[planner][cli][search]") {
  const std::string args = "--model llama3-8b --cluster 64xH100 --global-batch 256 --top 20 --pareto";
  const nlohmann::json one = RunJson(args + " --threads 1");
  const nlohmann::json two = RunJson(args + " --threads 2");
  CHECK(one["threads"] == 1);
  CHECK(two["threads"] == 2);
  CHECK(one["top"] == two["top"]);
  CHECK(one["pareto"] == two["pareto"]);
  CHECK(one["explain"] == two["explain"]);
}

TEST_CASE("search --explain and --explain-plan say why", "[planner][cli][search]") {
  const CliResult r = RunSearch("--explain --explain-plan dp=2,tp=16");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  for (const char* text : {"Why candidates were removed", "pp_divides_layers", "batch_divides",
                           "memory_limit", "fitting", "Plan dp=2,tp=16", "world_size",
                           "tp_within_node"})
    CHECK_THAT(r.output, Catch::Contains(text));
  const CliResult fat = RunSearch("--explain-plan dp=8,mbs=8");
  INFO(fat.output);
  CHECK_THAT(fat.output, Catch::Contains("does not fit: needs"));
  const CliResult ranked = RunSearch("--explain-plan tp=8");
  CHECK_THAT(ranked.output, Catch::Contains("fits (") && Catch::Contains("rank "));
  // dp left out fills the GPUs, as in estimate's --plan: 8 GPUs / tp=4.
  const CliResult filled = RunSearch("--explain-plan tp=4,zero=1");
  INFO(filled.output);
  CHECK_THAT(filled.output, Catch::Contains("dp=2,tp=4,zero=1") && !Catch::Contains("world_size"));
}

TEST_CASE("search --explain-plan calls a plan over only by the assumed fragmentation tight",
          "[planner][cli][search]") {
  const CliResult e = test::RunMeshplan("estimate --plan dp=8,zero=1 --headroom 0 --format json",
                                        /*with_stderr=*/false);
  REQUIRE(e.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(e.output);
  const double total = j["memory"]["total_bytes"];
  const double overhead = j["memory"]["breakdown"]["allocator_overhead_bytes"];
  const double capacity = j["usable_bytes"];  // headroom 0: the whole card
  REQUIRE(overhead > 0);
  // A headroom that leaves between the tensors' need and the need with the fragmentation.
  const double headroom = 1 - (total - overhead / 2) / capacity;
  const CliResult r =
      RunSearch(fmt::format("--explain-plan dp=8,zero=1 --headroom {:.6f} --top 1", headroom));
  INFO(r.output);
  CHECK_THAT(r.output, Catch::Contains("  tight, left out: needs ") &&
                           Catch::Contains("of it is the allocator's assumed fragmentation: it "
                                           "fits if the allocator wastes less"));
}

TEST_CASE("search's no-fit advice says when the smallest plan is tight", "[planner][cli][search]") {
  // Nothing fits in 5% of the card; the smallest plan's needs with and without the assumed
  // fragmentation, and the card's capacity (usable / 0.05). No offload: the headroom shrinks
  // the host memory too, and a plan over it is not tight.
  const char* no_offload = "--only offload_opt=0,offload_act=0,offload_params=0";
  const nlohmann::json none = RunJson(fmt::format("{} --headroom 0.95", no_offload), 3);
  const nlohmann::json& smallest = none["no_fit"]["smallest"]["cost"];
  const double total = smallest["memory"]["total_bytes"];
  const double overhead = smallest["memory"]["breakdown"]["allocator_overhead_bytes"];
  const double capacity = smallest["usable_bytes"].get<double>() / 0.05;
  REQUIRE(overhead > 0);
  // Between the two needs: still nothing fits (no plan needs less than the smallest), and the
  // smallest is tight.
  const double headroom = 1 - (total - overhead / 2) / capacity;
  const CliResult r = RunSearch(fmt::format("{} --headroom {:.6f}", no_offload, headroom));
  INFO(r.output);
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.output, Catch::Contains("The smallest is ") &&
                           Catch::Contains("of it is the allocator's assumed fragmentation: it "
                                           "fits if the allocator wastes less"));
}

TEST_CASE("search: bad inputs exit 2 with a clear message", "[planner][cli][search]") {
  struct Bad {
    const char* args;
    const char* message;
  };
  const Bad cases[] = {
      {"--model no-such-model", "unknown model"},
      // Even stages only: pp=3 would split the 32 layers unevenly (11 + 11 + 10).
      {"--cluster 3xH100 --even-stages", "no valid plan splits 3 GPUs"},
      {"--model spec-194m-tied --cluster 8xH100 --global-batch 3 --seq 100 --only tp=1,pp=1",
       "batch_divides"},
      {"--global-batch 0", "--global-batch"},
      {"--only foo=1", "unknown key"},
      {"--explain-plan tp=four", "integer"},
      {"--headroom 1.5", "--headroom"},
      {"--format xml", "format"},
      // --bench runs its own two setups: a setup flag would be silently ignored.
      {"--bench --model llama2-7b", "--bench: runs its two built-in setups"},
      // ... and it prints only its timings: an output flag would be ignored too.
      {"--bench --explain", "--explain: cannot be combined with --bench"},
      {"--bench --pareto", "--pareto: cannot be combined with --bench"},
      {"--bench --explain-plan dp=8", "--explain-plan: cannot be combined with --bench"},
      {"--bench --simulate-top 2", "--simulate-top: cannot be combined with --bench"},
      {"--bench --export megatron", "--export: cannot be combined with --bench"},
  };
  for (const Bad& b : cases) {
    const CliResult r = RunSearch(b.args);
    INFO(b.args << "\n" << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(b.message));
  }
}

TEST_CASE("search: no plan fits -> exit 3 and what would make one fit", "[planner][cli][search]") {
  const CliResult r = RunSearch(kStory1);
  INFO(r.output);
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.output, Catch::Contains("No plan fits"));
  CHECK_THAT(r.output, Catch::Contains("--cluster 2xa40"));
  const nlohmann::json j = RunJson(kStory1, 3);
  CHECK(j["fitting"] == 0);
  CHECK(j["top"].empty());
  REQUIRE(j["no_fit"]["suggestions"].size() >= 1);
  CHECK(j["no_fit"]["suggestions"][0]["best"]["cost"]["fits"] == true);
  CHECK(j["no_fit"]["smallest"]["cost"]["memory"]["total_bytes"].get<double>() >
        j["no_fit"]["usable_bytes"].get<double>());
}

}  // namespace
}  // namespace meshplan
