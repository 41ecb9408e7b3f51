// Running the ranks of a distributed test as threads of one process.
//
// OnThreads(n, body) runs body(rank) on n threads and, after all joined, reports
// each rank's exception as a Catch2 failure naming the rank. OnMesh(plan, body) does the
// same with one thread per rank of the plan, each handed its DeviceMesh (Gloo groups
// over one in-process HashStore; a one-rank plan needs no network). Catch2 assertions are
// not thread-safe, so bodies signal failure by throwing (Expect does that).
#pragma once

// LibTorch before Catch2: glog (pulled in by c10) defines a CHECK macro that would
// replace Catch2's if catch.hpp came first.
#include <torch/types.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <catch2/catch.hpp>

#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "executor/parallel/device_mesh.h"

namespace meshplan::test {

inline void OnThreads(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  std::vector<std::string> errors(n);
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[r] = e.what();
        if (errors[r].empty()) errors[r] = "exception without a message";
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << " of " << n);
    CHECK(errors[r] == "");
  }
}

inline void OnMesh(const ParallelPlan& plan, const std::function<void(const DeviceMesh&)>& body) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  store->setTimeout(std::chrono::seconds(60));
  GlooOptions options;
  options.timeout = std::chrono::seconds(60);
  OnThreads(static_cast<int>(plan.world_size()), [&](int r) {
    const DeviceMesh mesh(plan, r, GlooGroupFactory(store, r, options));
    body(mesh);
  });
}

inline void Expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

}  // namespace meshplan::test
