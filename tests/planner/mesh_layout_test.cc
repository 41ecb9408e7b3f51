// Mesh layout: rank <-> coordinates (tp innermost, dp outermost) and group members.
#include <catch2/catch.hpp>

#include <set>

#include "planner/mesh_layout.h"

namespace meshplan {
namespace {

ParallelPlan Mesh(int64_t dp, int64_t pp, int64_t cp, int64_t tp) {
  ParallelPlan p;
  p.dp = dp;
  p.pp = pp;
  p.cp = cp;
  p.tp = tp;
  return p;
}

TEST_CASE("mesh layout follows rank = ((dp*pp + pp)*cp + cp)*tp + tp", "[planner][mesh]") {
  const ParallelPlan plan = Mesh(2, 3, 2, 2);  // 24 ranks
  // rank 17 = ((1*3 + 1)*2 + 0)*2 + 1
  const MeshCoords c = CoordsOfRank(plan, 17);
  CHECK(c[MeshDim::kDp] == 1);
  CHECK(c[MeshDim::kPp] == 1);
  CHECK(c[MeshDim::kCp] == 0);
  CHECK(c[MeshDim::kTp] == 1);
  for (int64_t r = 0; r < plan.world_size(); ++r) CHECK(RankOfCoords(plan, CoordsOfRank(plan, r)) == r);
  CHECK_THROWS_AS(CoordsOfRank(plan, 24), std::out_of_range);
  CHECK_THROWS_AS(CoordsOfRank(plan, -1), std::out_of_range);
}

TEST_CASE("mesh groups for dp=2, pp=2, tp=2", "[planner][mesh]") {
  const ParallelPlan plan = Mesh(2, 2, 1, 2);
  using V = std::vector<int64_t>;
  // tp pairs are adjacent ranks (inside a node); pp strides by tp; dp by pp*tp.
  CHECK(MeshGroupMembers(plan, 0, MeshDim::kTp) == V{0, 1});
  CHECK(MeshGroupMembers(plan, 5, MeshDim::kTp) == V{4, 5});
  CHECK(MeshGroupMembers(plan, 0, MeshDim::kPp) == V{0, 2});
  CHECK(MeshGroupMembers(plan, 7, MeshDim::kPp) == V{5, 7});
  CHECK(MeshGroupMembers(plan, 1, MeshDim::kDp) == V{1, 5});
  CHECK(MeshGroupMembers(plan, 6, MeshDim::kDp) == V{2, 6});
  CHECK(MeshGroupMembers(plan, 3, MeshDim::kCp) == V{3});
}

TEST_CASE("mesh groups partition the world along every dimension", "[planner][mesh]") {
  const ParallelPlan plan = Mesh(GENERATE(1, 2), GENERATE(1, 3), GENERATE(1, 2), GENERATE(1, 4));
  for (const MeshDim dim : kAllMeshDims) {
    std::set<int64_t> seen;
    for (int64_t r = 0; r < plan.world_size(); ++r) {
      const auto members = MeshGroupMembers(plan, r, dim);
      REQUIRE(static_cast<int64_t>(members.size()) == MeshDimSize(plan, dim));
      // A rank's coordinate along dim is its index in its group.
      CHECK(members[CoordsOfRank(plan, r)[dim]] == r);
      // Every member sees the same group.
      for (int64_t m : members) CHECK(MeshGroupMembers(plan, m, dim) == members);
      seen.insert(members.begin(), members.end());
    }
    CHECK(static_cast<int64_t>(seen.size()) == plan.world_size());
  }
}

}  // namespace
}  // namespace meshplan
