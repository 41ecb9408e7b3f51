// MeshDim: the dimensions of the device mesh (dp, pp, cp, tp), the expert-parallel
// dimension ep, and a value per dimension.
// One name per dimension everywhere: plan strings, JSON, tables, communicators.
// ep adds no factor to the rank layout (it is carved out of dp: planner/mesh_layout.h), so
// kAllMeshDims, the placement dimensions, leave it out; kAllCommDims, the dimensions that
// communicate (streams, bytes and exposed time per dimension), hold it.
#pragma once

#include <array>

namespace meshplan {

// The dimensions of the device mesh, in placement order from outermost.
enum class MeshDim { kDp = 0, kPp = 1, kCp = 2, kTp = 3, kEp = 4 };
inline constexpr int kNumMeshDims = 4;  // the placement dimensions
inline constexpr std::array<MeshDim, kNumMeshDims> kAllMeshDims{MeshDim::kDp, MeshDim::kPp,
                                                                 MeshDim::kCp, MeshDim::kTp};
inline constexpr int kNumCommDims = 5;  // the placement dimensions and ep
inline constexpr std::array<MeshDim, kNumCommDims> kAllCommDims{
    MeshDim::kDp, MeshDim::kPp, MeshDim::kCp, MeshDim::kTp, MeshDim::kEp};
inline const char* ToString(MeshDim dim) {
  constexpr const char* kNames[] = {"dp", "pp", "cp", "tp", "ep"};
  return kNames[static_cast<int>(dim)];
}
// A value per communication dimension (dp, pp, cp, tp, ep), indexed by MeshDim.
struct PerMeshDim {
  std::array<double, kNumCommDims> values{};
  double& operator[](MeshDim d) { return values[static_cast<int>(d)]; }
  double operator[](MeshDim d) const { return values[static_cast<int>(d)]; }
  double sum() const { return values[0] + values[1] + values[2] + values[3] + values[4]; }
};

}  // namespace meshplan
