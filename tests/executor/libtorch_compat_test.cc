// The LibTorch seam (executor/libtorch_compat.h): its switches follow the version of the
// LibTorch CMake linked (TorchConfigVersion.cmake, passed in as MESHPLAN_TORCH_PACKAGE_VERSION),
// not only the headers' own macros. So the LibTorch 2 build cannot quietly skip the 2.x-only
// paths (fused attention and fused AdamW on CPU: [model] and [adamw] tests), and on 1.13 the
// missing features refuse with the version instead of running something else.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "executor/libtorch_compat.h"

namespace meshplan {
namespace {

struct MajorMinor {
  int major = 0, minor = 0;
  bool AtLeast(int M, int m) const { return major > M || (major == M && minor >= m); }
};

MajorMinor PackageVersion() {
  MajorMinor v;
  REQUIRE(std::sscanf(MESHPLAN_TORCH_PACKAGE_VERSION, "%d.%d", &v.major, &v.minor) == 2);
  return v;
}

TEST_CASE("libtorch compat: the headers are those of the LibTorch CMake found",
          "[executor][libtorch]") {
  const std::string package = MESHPLAN_TORCH_PACKAGE_VERSION;  // "2.11.0"; headers "2.11.0+cu130"
  CHECK(std::string(libtorch::kVersion).rfind(package, 0) == 0);
}

TEST_CASE("libtorch compat: each feature is on exactly from its release",
          "[executor][libtorch]") {
  const MajorMinor v = PackageVersion();
  INFO("LibTorch " << MESHPLAN_TORCH_PACKAGE_VERSION);
  CHECK(libtorch::kHasSdpaGqa == v.AtLeast(2, 5));
  CHECK(libtorch::HasFusedAdamW(at::Device(at::kCPU)) == v.AtLeast(2, 4));
  CHECK(libtorch::HasFusedAdamW(at::Device(at::kCUDA)) == v.AtLeast(2, 0));
}

TEST_CASE("libtorch compat: a feature this LibTorch lacks refuses, naming the release",
          "[executor][libtorch]") {
  at::manual_seed(0);
  const at::Tensor q = at::randn({1, 4, 3, 8}), kv = at::randn({1, 2, 3, 8});
  if (libtorch::kHasSdpaGqa) {
    CHECK(libtorch::CausalSdpaGqa(q, kv, kv).sizes() == q.sizes());
  } else {
    CHECK_THROWS_WITH(libtorch::CausalSdpaGqa(q, kv, kv),
                      Catch::Contains("LibTorch 2.5 or later") &&
                          Catch::Contains(std::string("this one is ") + libtorch::kVersion));
  }
}

}  // namespace
}  // namespace meshplan
