// The offload and overlap choices on the command line: bad input exits 2 naming the file
// and field, estimate prints device and host columns, search --explain says what it chose.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli_run.h"

namespace meshplan {
namespace {

using test::CliResult;
using test::RunMeshplan;

std::filesystem::path WriteTemp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("meshplan_offload_" + std::to_string(getpid()) + "_" + name);
  std::ofstream(path) << text;
  return path;
}

TEST_CASE("offload on a cluster without host data exits 2 naming the field",
          "[planner][cli][offload]") {
  // configs/hardware/a40.yaml has no host: block.
  const CliResult estimate = RunMeshplan(
      "estimate --model llama2-7b --cluster 8xA40 --global-batch 64 --plan dp=8,zero=1,offload_opt=1 "
      "--framework deepspeed");
  CHECK(estimate.exit_code == 2);
  CHECK_THAT(estimate.output, Catch::Contains("host.memory_GB_per_node"));
  CHECK_THAT(estimate.output, Catch::Contains("--cluster 8xA40"));
  CHECK_THAT(estimate.output, Catch::Contains("offload_opt=1"));
  const CliResult search = RunMeshplan(
      "search --model llama2-7b --cluster 8xA40 --global-batch 64 --only offload_act=1");
  CHECK(search.exit_code == 2);
  CHECK_THAT(search.output, Catch::Contains("host.memory_GB_per_node"));
}

TEST_CASE("a bad host: block is refused at its file, line and field", "[planner][cli][offload]") {
  const auto bad = WriteTemp("bad_host.yaml",
                             "name: one-node\ngpu: a100-80gb\nnodes: 1\n"
                             "host:\n  memory_GB_per_node: -1\n");
  const CliResult r = RunMeshplan("estimate --model llama2-7b --cluster " + bad.string() +
                                  " --global-batch 64 --plan dp=8");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(bad.string() + ":5"));
  CHECK_THAT(r.output, Catch::Contains("memory_GB_per_node"));
  const auto unknown = WriteTemp("unknown_host.yaml",
                                 "name: one-node\ngpu: a100-80gb\nnodes: 1\n"
                                 "host:\n  memory_TB: 2\n");
  const CliResult u = RunMeshplan("estimate --model llama2-7b --cluster " + unknown.string() +
                                  " --global-batch 64 --plan dp=8");
  CHECK(u.exit_code == 2);
  CHECK_THAT(u.output, Catch::Contains("memory_TB"));
  CHECK_THAT(u.output, Catch::Contains("optimizer_GBps"));  // the allowed keys are listed
  std::filesystem::remove(bad);
  std::filesystem::remove(unknown);
}

TEST_CASE("a cluster's host: block overrides its GPU's, key by key", "[planner][cli][offload]") {
  const auto small = WriteTemp("small_host.yaml",
                               "name: small-host\ngpu: a100-80gb\nnodes: 1\n"
                               "host:\n  memory_GB_per_node: 1\n");
  const CliResult r = RunMeshplan("estimate --model llama2-7b --cluster " + small.string() +
                                  " --global-batch 64 --framework deepspeed "
                                  "--plan dp=8,zero=1,offload_opt=1");
  CHECK(r.exit_code == 0);  // the link and CPU rate come from a100-80gb.yaml
  CHECK_THAT(r.output, Catch::Contains("host_memory_exceeded"));
  // --explain-plan names the host limit as the reason.
  const CliResult probe = RunMeshplan("search --model llama2-7b --cluster " + small.string() +
                                      " --global-batch 64 --threads 2 --top 1 --framework deepspeed "
                                      "--explain-plan "
                                      "dp=8,zero=1,offload_opt=1");
  CHECK_THAT(probe.output, Catch::Contains("does not fit: host_memory_exceeded"));
  std::filesystem::remove(small);
}

TEST_CASE("estimate splits memory into device and host", "[planner][cli][offload]") {
  const std::string args =
      "estimate --model llama2-7b --cluster 8xH100 --global-batch 64 --plan "
      "dp=8,zero=1,offload_opt=1,offload_act=1 --framework deepspeed";
  const CliResult table = RunMeshplan(args);
  REQUIRE(table.exit_code == 0);
  CHECK_THAT(table.output, Catch::Contains("device"));
  CHECK_THAT(table.output, Catch::Contains("host, all GPUs of a node"));
  CHECK_THAT(table.output, Catch::Contains("optimizer (CPU)"));
  const CliResult json = RunMeshplan(args + " --format json", false);
  REQUIRE(json.exit_code == 0);
  const auto j = nlohmann::json::parse(json.output);
  CHECK(j["memory"]["breakdown"]["optimizer_bytes"].get<double>() == 0);
  CHECK(j["memory"]["host"]["optimizer_bytes"].get<double>() > 0);
  CHECK(j["memory"]["host"]["activations_bytes"].get<double>() > 0);
  CHECK(j["time"]["offload_s"].get<double>() >= 0);
  CHECK(j["fits_host"].get<bool>());
}

TEST_CASE("search --explain reports the overlap and offload choices", "[planner][cli][offload]") {
  const CliResult r = RunMeshplan(
      "search --model llama3-8b --cluster 16xH100 --global-batch 32 --explain --threads 2");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("tp_overlap   1 on"));
  CHECK_THAT(r.output, Catch::Contains("dp_overlap"));
  CHECK_THAT(r.output, Catch::Contains("offload      tried on plans that did not fit"));
}

}  // namespace
}  // namespace meshplan
