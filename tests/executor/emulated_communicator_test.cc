// EmulatedCommunicator: what each call leaves in its outputs (finite, deterministic, the
// shapes of a real call), the Gloo temporaries it holds until waited, the cost model's time
// under kModel and none under kZero; EmulatedGroupFactory builds the DeviceMesh of one rank
// of a 128-rank plan at its coordinates; RecordingCommunicator logs each call.
#include <torch/types.h>

#include <catch2/catch.hpp>

#include <chrono>

#include "executor/comm/emulated_communicator.h"
#include "executor/comm/gloo_communicator.h"
#include "executor/comm/recording_communicator.h"
#include "executor/device/memory_probe.h"
#include "executor/parallel/device_mesh.h"
#include "planner/config/config_loader.h"
#include "planner/cost/collective_time.h"
#include "planner/mesh_layout.h"

namespace meshplan {
namespace {

using Clock = std::chrono::steady_clock;

EmulatedCommunicator Group(int size, int rank, EmulatedCommOptions options = {}) {
  return EmulatedCommunicator("tp", size, rank, std::move(options));
}

TEST_CASE("emulated collectives fill their outputs as peers with this rank's values would",
          "[executor][emulate][comm]") {
  EmulatedCommunicator comm = Group(4, 2);
  const torch::Tensor input = torch::arange(8, torch::kFloat);

  torch::Tensor reduced = input.clone();
  comm.AllReduceSum(reduced);
  CHECK(torch::equal(reduced, input));  // the peers add zeros

  torch::Tensor shard = torch::empty({2});
  comm.ReduceScatterSum(input, shard);
  CHECK(torch::equal(shard, input.narrow(0, 4, 2)));  // rank 2's chunk

  torch::Tensor gathered = torch::empty({4, 8});
  comm.AllGather(input, gathered);
  for (int i = 0; i < 4; ++i) CHECK(torch::equal(gathered[i], input));

  torch::Tensor wrong = torch::empty({3});
  CHECK_THROWS_AS(comm.ReduceScatterSum(input, wrong), std::invalid_argument);
  torch::Tensor buffer = torch::zeros({4});
  CHECK_THROWS_AS(comm.Send(buffer, 2), std::invalid_argument);  // itself
  CHECK_THROWS_AS(comm.Recv(buffer, 4), std::invalid_argument);  // outside the group
  CHECK_THROWS_AS(Group(2, 2), std::invalid_argument);
}

TEST_CASE("emulated receives are finite, drawn from a fixed distribution, and repeatable",
          "[executor][emulate][comm]") {
  EmulatedCommOptions options;
  options.seed = 7;
  EmulatedCommunicator a = Group(2, 0, options), b = Group(2, 0, options);
  torch::Tensor x = torch::full({4096}, std::numeric_limits<float>::quiet_NaN());
  torch::Tensor y = torch::empty({4096});
  a.Recv(x, 1);
  b.Recv(y, 1);
  CHECK(torch::isfinite(x).all().item<bool>());
  CHECK(torch::equal(x, y));  // same seed, same group: same values
  CHECK(std::abs(x.mean().item<double>()) < 0.1);  // N(0, 1): 4096 draws
  CHECK(std::abs(x.std().item<double>() - 1.0) < 0.1);

  torch::Tensor loss = torch::full({1}, std::numeric_limits<double>::quiet_NaN(), torch::kDouble);
  a.Broadcast(loss, 1);  // from a peer: drawn
  CHECK(std::isfinite(loss.item<double>()));
  torch::Tensor mine = torch::full({1}, 3.0, torch::kDouble);
  a.Broadcast(mine, 0);  // from itself: kept
  CHECK(mine.item<double>() == 3.0);
  torch::Tensor flags = torch::full({2}, 5, torch::kInt);
  a.Recv(flags, 1);
  CHECK(flags.sum().item<int>() == 0);
}

TEST_CASE("an emulated Gloo reduce-scatter holds Gloo's temporary until it is waited",
          "[executor][emulate][comm]") {
  MemoryProbe& probe = CpuMemoryProbe();
  const torch::Tensor input = torch::ones({3 * 1024});
  torch::Tensor output = torch::empty({1024});
  const int64_t before = probe.live_bytes();
  EmulatedCommunicator three = Group(3, 0);  // workspace kGloo by default
  auto handle = three.ReduceScatterSumAsync(input, output);
  CHECK(probe.live_bytes() - before == 1024 * 4);  // one output-sized temporary (size > 2)
  handle->Wait();
  CHECK(probe.live_bytes() == before);
  EmulatedCommOptions nccl;
  nccl.workspace = EmulatedWorkspace::kNone;
  EmulatedCommunicator none = Group(3, 0, nccl);
  auto quiet = none.ReduceScatterSumAsync(input, output);
  CHECK(probe.live_bytes() == before);
  quiet->Wait();
}

TEST_CASE("emulated communication takes the cost model's time, or none",
          "[executor][emulate][comm]") {
  EmulatedCommOptions options;
  options.time = EmulatedCommTime::kModel;
  options.cluster = LoadCluster("2xa40-pcie");
  options.group = CommGroup{{1, 2}, {}};
  torch::Tensor buffer = torch::zeros({16 << 20});  // 64 MiB: milliseconds over PCIe
  const double predicted_s = CollectiveTime(CollectiveKind::kAllReduce, 64.0 * (1 << 20),
                                            options.group, options.cluster);
  REQUIRE(predicted_s > 1e-3);
  EmulatedCommunicator model = Group(2, 0, options);
  auto start = Clock::now();
  auto handle = model.AllReduceSumAsync(buffer);
  CHECK_FALSE(handle->Test());  // in flight
  handle->Wait();
  const double waited_s = std::chrono::duration<double>(Clock::now() - start).count();
  CHECK(waited_s >= predicted_s);
  CHECK(waited_s < predicted_s + 0.05);
  // Two calls on one group queue behind each other.
  start = Clock::now();
  auto first = model.AllReduceSumAsync(buffer);
  auto second = model.AllReduceSumAsync(buffer);
  second->Wait();
  CHECK(std::chrono::duration<double>(Clock::now() - start).count() >= 2 * predicted_s);
  first->Wait();

  EmulatedCommunicator zero = Group(2, 0);
  auto done = zero.AllReduceSumAsync(buffer);
  CHECK(done->Test());
}

TEST_CASE("one rank of a tp=8 pp=16 dp=2 plan gets emulated groups at its coordinates",
          "[executor][emulate][comm]") {
  const ParallelPlan plan = ParsePlanString("dp=2,tp=8,pp=16,cp=1");
  const int rank = 171;  // dp 1, pp 5, tp 3
  CommLog log;
  const DeviceMesh mesh(plan, rank,
                        RecordingGroupFactory(EmulatedGroupFactory(plan, rank, {}), log));
  CHECK(mesh.coord(MeshDim::kDp) == 1);
  CHECK(mesh.coord(MeshDim::kPp) == 5);
  CHECK(mesh.coord(MeshDim::kTp) == 3);
  CHECK(mesh.comm(MeshDim::kTp).size() == 8);
  CHECK(mesh.comm(MeshDim::kTp).rank() == 3);
  CHECK(mesh.comm(MeshDim::kPp).rank() == 5);
  CHECK(mesh.weight_replicas().size() == 2);
  torch::Tensor x = torch::zeros({2, 3});
  mesh.comm(MeshDim::kPp).Recv(x, 4);
  mesh.comm(MeshDim::kTp).AllReduceSum(x);
  REQUIRE(log.lines.size() == 2);
  CHECK(log.lines[0] == "pp recv src=4 Float[2,3]");
  CHECK(log.lines[1] == "tp all_reduce Float[2,3]");
  // "ep" and "edp_cp" are the expert groups of MoE plans; any other name is refused.
  CHECK_THROWS_AS(EmulatedGroupFactory(plan, rank, {})("xp", {rank}), std::invalid_argument);
}

}  // namespace
}  // namespace meshplan
