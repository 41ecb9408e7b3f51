// DeviceMesh: one communicator per mesh dimension, built over Gloo by 8 ranks
// running as threads (dp=2, pp=2, tp=2), checked against planner/mesh_layout.h.
#include "tests/executor/rank_threads.h"  // first: LibTorch before Catch2

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "executor/parallel/device_mesh.h"

namespace meshplan {
namespace {

using namespace std::chrono_literals;
using test::Expect;
using test::OnThreads;

GlooOptions LocalOptions() {
  GlooOptions options;
  options.timeout = 20s;
  options.hostname = "127.0.0.1";
  return options;
}

TEST_CASE("device mesh dp=2 pp=2 tp=2: each group holds the ranks sharing the other coordinates",
          "[executor][mesh]") {
  ParallelPlan plan;
  plan.dp = 2;
  plan.pp = 2;
  plan.tp = 2;
  auto store = c10::make_intrusive<c10d::HashStore>();
  store->setTimeout(20s);
  std::mutex mu;
  std::vector<std::pair<int, std::string>> factory_calls;  // (world rank, dim)

  OnThreads(8, [&](int r) {
    GroupFactory gloo = GlooGroupFactory(store, r, LocalOptions());
    GroupFactory recording = [&, r](const std::string& name, const std::vector<int>& members) {
      {
        std::lock_guard<std::mutex> lock(mu);
        factory_calls.emplace_back(r, name);
      }
      return gloo(name, members);
    };
    DeviceMesh mesh(plan, r, recording);
    Expect(mesh.world_size() == 8, "world size");
    for (const MeshDim dim : kAllMeshDims) {
      const std::string name = ToString(dim);
      Communicator& comm = mesh.comm(dim);
      const auto want = MeshGroupMembers(plan, r, dim);
      Expect(comm.size() == static_cast<int>(want.size()), name + " size");
      Expect(comm.rank() == mesh.coord(dim), name + " rank is the coordinate");
      // Who is really in the group: all-gather the world ranks.
      torch::Tensor in = torch::full({1}, static_cast<float>(r));
      torch::Tensor out = torch::zeros({comm.size()});
      comm.AllGather(in, out);
      for (int i = 0; i < comm.size(); ++i)
        Expect(out[i].item<float>() == static_cast<float>(want[i]),
               name + " group of world rank " + std::to_string(r) + " holds the wrong ranks");
      // A sum over the group reaches exactly its members.
      torch::Tensor one = torch::ones({1});
      comm.AllReduceSum(one);
      Expect(one.item<float>() == static_cast<float>(want.size()), name + " all-reduce");
    }
  });

  // cp has size 1: no Gloo group; the others are created dp, pp, tp on every rank.
  REQUIRE(factory_calls.size() == 24);
  for (int r = 0; r < 8; ++r) {
    std::vector<std::string> dims;
    for (const auto& [rank, dim] : factory_calls)
      if (rank == r) dims.push_back(dim);
    CHECK(dims == std::vector<std::string>{"dp", "pp", "tp"});
  }
}

TEST_CASE("device mesh: the dp x cp weight-replica group holds the ranks with the same weights",
          "[executor][mesh]") {
  ParallelPlan plan;
  plan.dp = 2;
  plan.cp = 2;
  plan.tp = 2;
  auto store = c10::make_intrusive<c10d::HashStore>();
  store->setTimeout(20s);
  OnThreads(8, [&](int r) {
    DeviceMesh mesh(plan, r, GlooGroupFactory(store, r, LocalOptions()));
    Communicator& group = mesh.weight_replicas();
    const auto want = WeightReplicaMembers(plan, r);
    Expect(group.size() == 4, "dp x cp has 4 ranks");
    Expect(group.rank() == mesh.coord(MeshDim::kDp) * 2 + mesh.coord(MeshDim::kCp),
           "rank inside the group is dp_i * cp + cp_i");
    torch::Tensor in = torch::full({1}, static_cast<float>(r));
    torch::Tensor out = torch::zeros({4});
    group.AllGather(in, out);
    for (int i = 0; i < 4; ++i)
      Expect(out[i].item<float>() == static_cast<float>(want[i]),
             "weight-replica group of world rank " + std::to_string(r));
    // Same tp coordinate everywhere in the group: the ranks hold the same weight shard.
    Expect(want[0] % 2 == r % 2, "members share the tp coordinate");
  });
  ParallelPlan dp_only;
  dp_only.dp = 2;
  auto store2 = c10::make_intrusive<c10d::HashStore>();
  store2->setTimeout(20s);
  OnThreads(2, [&](int r) {
    DeviceMesh mesh(dp_only, r, GlooGroupFactory(store2, r, LocalOptions()));
    Expect(&mesh.weight_replicas() == &mesh.comm(MeshDim::kDp), "cp = 1: the dp group itself");
  });
}

TEST_CASE("device mesh on one rank needs no factory", "[executor][mesh]") {
  ParallelPlan plan;  // 1x1x1x1
  DeviceMesh mesh(plan, 0, [](const std::string&, const std::vector<int>&) -> std::unique_ptr<Communicator> {
    throw std::logic_error("factory called for a group of one");
  });
  for (const MeshDim dim : kAllMeshDims) {
    CHECK(mesh.comm(dim).size() == 1);
    torch::Tensor in = torch::arange(4, torch::kFloat32), out = torch::zeros({4});
    mesh.comm(dim).ReduceScatterSum(in, out);
    CHECK(torch::equal(in, out));
  }
  CHECK_THROWS_AS(DeviceMesh(plan, 1, nullptr), std::out_of_range);
}

}  // namespace
}  // namespace meshplan
