// The Chrome/Perfetto trace: valid JSON with one process per stage, one track per stream,
// and one complete event per op that took time.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "planner/parallel_plan.h"
#include "sim_test_util.h"
#include "simulator/simulate.h"
#include "simulator/trace_export.h"

namespace meshplan {
namespace {

TEST_CASE("the trace file parses as JSON and holds the expected tracks and events",
          "[simulator][trace]") {
  const ModelSpec model = test::TinyLlama(8);
  const ClusterSpec cluster = test::TestCluster(2, 4, 3e11, 2.5e10, 3e-6, 2e-6);
  const ParallelPlan plan = ParsePlanString("pp=2,tp=2,cp=2,schedule=interleaved,vpp=2,recompute=full");
  const TrainingSpec training = test::Training(4, 256);
  const SimResult sim = Simulate(model, cluster, training, plan);
  REQUIRE(sim.timeline.size() == static_cast<size_t>(sim.ops));

  const std::string path = std::string(MESHPLAN_BINARY) + ".trace_test.json";
  WriteTrace(sim, path, ToPlanString(plan));
  std::ifstream in(path);
  REQUIRE(in);
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::remove(path.c_str());

  REQUIRE(trace.contains("traceEvents"));
  CHECK(trace["otherData"]["title"] == ToPlanString(plan));
  CHECK(trace["otherData"]["step_time_s"].get<double>() == Approx(sim.time.total_s));
  std::map<int, std::string> processes;
  std::map<std::pair<int, int>, std::string> threads;
  std::map<std::pair<int, int>, int> events;  // (pid, tid) -> complete events
  std::set<std::string> names;
  int complete = 0;
  double last_end_us = 0;
  double first_start_us = 1e300;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    const int pid = e["pid"], tid = e["tid"];
    if (ph == "M" && e["name"] == "process_name") processes[pid] = e["args"]["name"];
    if (ph == "M" && e["name"] == "thread_name") threads[{pid, tid}] = e["args"]["name"];
    if (ph != "X") continue;
    ++complete;
    ++events[{pid, tid}];
    names.insert(e["name"].get<std::string>());
    first_start_us = std::min(first_start_us, e["ts"].get<double>());
    CHECK(e["dur"].get<double>() > 0);
    last_end_us = std::max(last_end_us, e["ts"].get<double>() + e["dur"].get<double>());
    if (tid == static_cast<int>(SimStream::kCompute)) CHECK(e["args"].contains("flops"));
    else CHECK(e["args"]["bytes"].get<double>() > 0);
  }
  // One process per stage, five named tracks each.
  CHECK(processes == std::map<int, std::string>{{0, "stage 0 (rank 0)"}, {1, "stage 1 (rank 4)"}});
  for (int pid = 0; pid < 2; ++pid)
    for (int tid = 0; tid < kNumSimStreams; ++tid)
      CHECK(threads[{pid, tid}] == ToString(static_cast<SimStream>(tid)));
  // Every op that took time is an event; the last one ends at the step time.
  int timed = 0;
  for (const SimSpan& s : sim.timeline) timed += s.end_s > s.start_s ? 1 : 0;
  CHECK(complete == timed);
  CHECK(last_end_us == Approx(sim.time.total_s * 1e6).epsilon(1e-9));
  CHECK(first_start_us == 0);  // the step starts with stage 0's first forward, at time 0
  // Every track carries events on both stages; dp holds the gradient buckets of the
  // dp x cp group (cp ranks hold the same weights): one per part (4 blocks + embedding
  // or head) per step.
  for (int pid = 0; pid < 2; ++pid) {
    CHECK(events[{pid, static_cast<int>(SimStream::kCompute)}] > 0);
    CHECK(events[{pid, static_cast<int>(SimStream::kTp)}] > 0);
    CHECK(events[{pid, static_cast<int>(SimStream::kCp)}] > 0);
    CHECK(events[{pid, static_cast<int>(SimStream::kPp)}] > 0);
    CHECK(events[{pid, static_cast<int>(SimStream::kDp)}] == 5);
  }
  CHECK(names.count("F mb0 embedding") == 1);
  CHECK(names.count("F mb0 L0 attention") == 1);
  CHECK(names.count("R mb3 L7 attention core 1") == 1);
  CHECK(names.count("send activation mb0 chunk 0") == 1);
  CHECK(names.count("optimizer head") == 1);
}

}  // namespace
}  // namespace meshplan
