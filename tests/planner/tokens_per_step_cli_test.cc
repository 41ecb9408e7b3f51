// --tokens-per-step (issue 34, item 2): the global batch in tokens, with decimal (M = 10^6)
// and binary (Mi = 2^20) suffixes, exact, on every command that takes --global-batch.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli_run.h"

namespace meshplan {
namespace {

using test::CliResult;

// The global batch `meshplan estimate` resolves for these flags (exit 0 required).
int64_t GlobalBatchOf(const std::string& flags) {
  const CliResult r = test::RunMeshplan("estimate --format json --cluster 8xH100 " + flags, false);
  INFO(flags << "\n" << r.output);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.output)["setup"]["global_batch"].get<int64_t>();
}

TEST_CASE("tokens per step: reads plain, decimal and binary counts exactly",
          "[planner][cli][tokens_per_step]") {
  CHECK(GlobalBatchOf("--seq 4096 --tokens-per-step 4194304") == 1024);
  CHECK(GlobalBatchOf("--seq 4096 --tokens-per-step 4Mi") == 1024);   // 2^22 / 2^12
  CHECK(GlobalBatchOf("--seq 2048 --tokens-per-step 16Mi") == 8192);
  CHECK(GlobalBatchOf("--seq 1000 --tokens-per-step 4M") == 4000);    // 4 * 10^6
  CHECK(GlobalBatchOf("--seq 2250 --tokens-per-step 4.5M") == 2000);  // 4,500,000 exactly
  CHECK(GlobalBatchOf("--seq 512 --tokens-per-step 0.5Mi") == 1024);
  CHECK(GlobalBatchOf("--seq 2000 --tokens-per-step 64k") == 32);
}

TEST_CASE("tokens per step: works on search and simulate too", "[planner][cli][tokens_per_step]") {
  const CliResult search = test::RunMeshplan(
      "search --format json --cluster 8xH100 --seq 4096 --tokens-per-step 256Ki --top 1", false);
  REQUIRE(search.exit_code == 0);
  CHECK(nlohmann::json::parse(search.output)["setup"]["global_batch"] == 64);
  const CliResult simulate = test::RunMeshplan(
      "simulate --format json --model spec-194m-tied --cluster 8xH100 --seq 1024 "
      "--tokens-per-step 16Ki --plan dp=8",
      false);
  INFO(simulate.output);
  REQUIRE(simulate.exit_code == 0);
  CHECK_THAT(simulate.output, Catch::Contains("\"global_batch\": 16"));
}

TEST_CASE("tokens per step: refuses what is not a whole number of sequences, with exit 2",
          "[planner][cli][tokens_per_step]") {
  struct Bad {
    const char* flags;
    const char* message;
  };
  const Bad cases[] = {
      // 4,000,000 / 8192 = 488.28...: not a whole number of sequences.
      {"--seq 8192 --tokens-per-step 4M", "not a whole number of sequences of --seq 8192"},
      {"--seq 8192 --tokens-per-step 4M", "e.g. 3,997,696 (488 sequences) or 4,005,888 (489)"},
      {"--seq 4096 --tokens-per-step 4.5M", "not a whole number of sequences"},
      // Not a whole number of tokens.
      {"--tokens-per-step 0.1Ki", "not a whole number of tokens"},
      // Forms it does not read: the allowed ones are named.
      {"--tokens-per-step 4m", "suffixes k M G T (powers of 10) or Ki Mi Gi Ti"},
      {"--tokens-per-step 4MB", "e.g. 4194304, 4M (10^6), 16Mi (2^20)"},
      {"--tokens-per-step=-4M", "is not a whole number of tokens"},
      {"--tokens-per-step 4.M", "is not a whole number of tokens"},
      {"--tokens-per-step=''", "--tokens-per-step"},  // CLI11: a value is required
      {"--tokens-per-step 0", "out of range"},
      {"--tokens-per-step 2T", "out of range"},
      // A plan the batch does not split names where the batch came from.
      {"--seq 4096 --tokens-per-step 4Ki --plan dp=8",
       "global_batch is --tokens-per-step 4Ki / --seq = 1"},
      // Both ways of giving the batch.
      {"--global-batch 64 --tokens-per-step 256Ki",
       "cannot be combined with --global-batch"},
  };
  for (const Bad& b : cases) {
    const CliResult r = test::RunMeshplan(std::string("estimate --cluster 8xH100 ") + b.flags);
    INFO(b.flags << "\n" << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(b.message));
    CHECK_THAT(r.output, Catch::Contains("--tokens-per-step"));
  }
  // A plan file supplies the batch: the flag beside it is refused.
  const CliResult file = test::RunMeshplan("estimate --plan-file x.yaml --tokens-per-step 4Mi");
  CHECK(file.exit_code == 2);
  CHECK_THAT(file.output, Catch::Contains("--tokens-per-step") &&
                              Catch::Contains("cannot be combined with --plan-file"));
  // The GUI refuses it the same way (before any window opens; the timeout only guards).
  const CliResult gui = test::RunShell(std::string("timeout 20 '") + MESHPLAN_BINARY +
                                       "' gui --plan-file x.yaml --tokens-per-step 4Mi 2>&1");
  CHECK(gui.exit_code == 2);
  CHECK_THAT(gui.output, Catch::Contains("--tokens-per-step: cannot be combined with --plan-file"));
}

}  // namespace
}  // namespace meshplan
