// MeshDim: the dimensions of the device mesh (dp, pp, cp, tp), and a value per dimension.
// One name per dimension everywhere: plan strings, JSON, tables, communicators.
#pragma once

#include <array>

namespace meshplan {

// The dimensions of the device mesh, in placement order from outermost.
enum class MeshDim { kDp = 0, kPp = 1, kCp = 2, kTp = 3 };
inline constexpr int kNumMeshDims = 4;
inline constexpr std::array<MeshDim, kNumMeshDims> kAllMeshDims{MeshDim::kDp, MeshDim::kPp,
                                                                 MeshDim::kCp, MeshDim::kTp};
inline const char* ToString(MeshDim dim) {
  constexpr const char* kNames[] = {"dp", "pp", "cp", "tp"};
  return kNames[static_cast<int>(dim)];
}
// A value per mesh dimension, indexed by MeshDim.
struct PerMeshDim {
  std::array<double, kNumMeshDims> values{};
  double& operator[](MeshDim d) { return values[static_cast<int>(d)]; }
  double operator[](MeshDim d) const { return values[static_cast<int>(d)]; }
  double sum() const { return values[0] + values[1] + values[2] + values[3]; }
};

}  // namespace meshplan
