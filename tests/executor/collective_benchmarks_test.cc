// The collective micro-benchmarks of `meshplan calibrate --collective-ranks`
// (executor/calibration/collective_benchmarks.h): the samples over Gloo ranks of one
// process, and the whole command, whose ranks are processes of the binary.
#include "tests/executor/rank_threads.h"  // first: LibTorch before Catch2

#include <nlohmann/json.hpp>

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
  plan.repeats = 2;
  plan.rounds = 1;
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
      seen.insert({static_cast<int>(s.kind), s.bytes});
    }
    CHECK(seen.size() == 6);  // every kind at every size, once
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
