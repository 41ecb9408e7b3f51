// The collective micro-benchmarks of `meshplan calibrate --collective-ranks`
// (executor/calibration/collective_benchmarks.h): the samples over Gloo ranks of one
// process, and the whole command, whose ranks are processes of the binary.
#include "tests/executor/rank_threads.h"  // first: LibTorch before Catch2

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <set>

#include "executor/calibration/collective_benchmarks.h"
#include "executor/comm/gloo_communicator.h"
#include "planner/config/config_loader.h"
#include "planner/cost/collective_time.h"
#include "tests/cli_run.h"

namespace meshplan {
namespace {

TEST_CASE("collective benchmarks: one positive sample per kind and size, full buffer bytes",
          "[executor][calibration]") {
  CollectiveBenchmarkPlan plan;
  plan.buffer_bytes = {4096, 1 << 16};
  plan.chunk_sides = {64, 96};
  plan.repeats = 2;
  plan.rounds = 3;
  auto store = c10::make_intrusive<c10d::HashStore>();
  store->setTimeout(std::chrono::seconds(60));
  std::vector<std::vector<CollectiveSample>> samples(2);
  test::OnThreads(2, [&](int r) {
    GlooCommunicator comm(store, r, {0, 1}, "bench");
    samples[static_cast<size_t>(r)] = BenchmarkCollectives(comm, at::kCPU, plan);
  });
  for (const auto& rank : samples) {
    REQUIRE(rank.size() == 6);
    std::set<std::pair<int, double>> seen;
    for (const CollectiveSample& s : rank) {
      CHECK(s.group_size == 2);
      CHECK(s.seconds > 0);
      CHECK((s.bytes == 4096 || s.bytes == 65536));
      // The sample is the median of its rounds, which come with it.
      REQUIRE(s.round_seconds.size() == 3);
      std::vector<double> rounds = s.round_seconds;
      std::sort(rounds.begin(), rounds.end());
      CHECK(s.seconds == rounds[1]);
      seen.insert({static_cast<int>(s.kind), s.bytes});
    }
    CHECK(seen.size() == 6);  // every kind at every size, once
  }
}

TEST_CASE("collective benchmarks: a plan without chunk sides is refused",
          "[executor][calibration]") {
  CollectiveBenchmarkPlan plan;
  plan.buffer_bytes = {4096, 1 << 16};
  plan.chunk_sides = {};
  auto store = c10::make_intrusive<c10d::HashStore>();
  store->setTimeout(std::chrono::seconds(60));
  std::vector<int> threw(2, 0);
  test::OnThreads(2, [&](int r) {
    GlooCommunicator comm(store, r, {0, 1}, "bench");
    try {
      BenchmarkCollectives(comm, at::kCPU, plan);
    } catch (const std::invalid_argument&) {
      threw[static_cast<size_t>(r)] = 1;
    }
  });
  CHECK(threw == std::vector<int>{1, 1});
}

TEST_CASE("calibrate --collective-bytes / --collective-chunks: the samples of those sizes "
          "after that compute, with their rounds, bad lists are refused",
          "[executor][calibration][cli]") {
  const test::ScratchDir dir("collective_chunks");
  const std::string report = dir.Path("report.json");
  const test::CliResult r = test::RunMeshplan(
      "calibrate --quick --threads 1 --collective-ranks 2 --collective-bytes 16384,8388608 "
      "--collective-chunks 64 --out '" + dir.Path("cpu.yaml") + "' --report '" + report + "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("collective all_reduce"));
  std::ifstream in(report);
  const nlohmann::json collectives = nlohmann::json::parse(in).at("collectives");
  REQUIRE(collectives.size() == 6);  // 3 kinds x 2 sizes
  for (const nlohmann::json& c : collectives) {
    CHECK((c.at("bytes").get<double>() == 16384 || c.at("bytes").get<double>() == 8388608));
    CHECK(c.at("round_s").size() == 3);  // --quick: 3 rounds
  }

  for (const char* bad : {"--collective-chunks 64",  // no --collective-ranks
                          "--collective-ranks 2 --collective-bytes 4096,4096",
                          "--collective-ranks 2 --collective-bytes 4096,x",
                          "--collective-ranks 2 --collective-chunks 0,128",
                          "--collective-ranks 2 --collective-chunks 2048",
                          "--collective-ranks 2 --collective-bytes 4096,134217728"}) {
    const test::CliResult refused = test::RunMeshplan(std::string("calibrate --quick ") + bad);
    INFO(bad << "\n" << refused.output);
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.output, Catch::Contains("--collective-"));
  }
}

TEST_CASE("calibrate --collective-ranks 2: rank processes fit the network block, and the CPU "
          "profile says communication does not overlap compute",
          "[executor][calibration][cli]") {
  const test::ScratchDir dir("collective_calibrate");
  const std::string yaml = dir.Path("cpu.yaml"), report = dir.Path("report.json");
  const test::CliResult r = test::RunMeshplan("calibrate --quick --threads 1 --collective-ranks 2 --out '" +
                                              yaml + "' --report '" + report + "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("rank processes sharing the CPU"));

  const GpuSpec gpu = LoadGpu(yaml);
  CHECK_FALSE(gpu.comm_overlaps_compute);
  const std::optional<ClusterSpec> network = LoadGpuNetwork(yaml);
  REQUIRE(network);
  CHECK(network->intra_node.latency_s > 0);
  CHECK(network->intra_node.bandwidth_Bps > 0);

  std::ifstream in(report);
  const nlohmann::json json = nlohmann::json::parse(in);
  const nlohmann::json& collectives = json.at("collectives");
  REQUIRE(collectives.size() == 9);  // 3 kinds x 3 sizes (--quick)
  for (const nlohmann::json& c : collectives) {
    CHECK(c.at("group_size").get<int>() == 2);
    CHECK(c.at("measured_s").get<double>() > 0);
    // The prediction is the fitted tier's ring formula for this collective.
    CollectiveSample s;
    s.kind = c.at("kind") == "all_reduce"       ? CollectiveKind::kAllReduce
             : c.at("kind") == "reduce_scatter" ? CollectiveKind::kReduceScatter
                                                : CollectiveKind::kAllGather;
    s.bytes = c.at("bytes").get<double>();
    s.group_size = 2;
    CHECK(c.at("predicted_s").get<double>() ==
          Approx(RingTime(s.kind, s.bytes, s.group_size, network->intra_node)).epsilon(1e-3));
  }
}

}  // namespace
}  // namespace meshplan
