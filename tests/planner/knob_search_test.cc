// The search's overlap and offload choices (planner/search/knob_variants.h): tried per grid
// point, dominated ones dropped, offload only where a plan does not fit, pins respected,
// results independent of the thread count.
#include <catch2/catch.hpp>

#include "planner/input_error.h"
#include "planner/search/search.h"
#include "tests/planner/cost_test_specs.h"

namespace meshplan {
namespace {

using testing::H100Cluster;
using testing::SpecLlama;
using testing::Training;

ClusterSpec WithHost(ClusterSpec c) {
  c.host.memory_bytes_per_node = 2'000'000'000'000;
  c.host.link = {"pcie", 50e9, 10e-6, 1.0};
  c.host.optimizer_Bps = 16e9;
  return c;
}

// ~1.6B parameters on one 12 GB GPU: 16 bytes per parameter of mixed-precision model
// states (26 GB) cannot fit; weights and gradients alone (6.5 GB) can.
struct OneSmallGpu {
  ModelSpec model = SpecLlama(2048, 16, 24, 8192);
  TrainingSpec training = Training(8, 1024);
  ClusterSpec cluster = [] {
    ClusterSpec c = H100Cluster(1, 1);
    c.gpu.memory_bytes = 12'000'000'000;
    return c;
  }();
};

SearchOptions Options(int threads) {
  SearchOptions o;
  o.threads = threads;
  o.top_k = 5;
  return o;
}

TEST_CASE("offload is tried where no plan fits, and makes one fit", "[planner][search][offload]") {
  const OneSmallGpu s;
  const SearchResult none = Search(s.model, s.cluster, s.training, Options(1));
  CHECK(none.fitting == 0);
  CHECK(none.variants == 0);  // no host data: no offload variants
  CHECK(none.knobs.offload_tried == 0);

  const ClusterSpec host = WithHost(s.cluster);
  const SearchResult found = Search(s.model, host, s.training, Options(1));
  REQUIRE(found.fitting > 0);
  CHECK(found.knobs.offload_tried > 0);
  CHECK(found.variants >= found.knobs.offload_tried);
  for (const RankedPlan& r : found.top) {
    CHECK(r.plan.offload_optimizer);  // the states are what does not fit
    CHECK(r.variant > 0);
    CHECK(r.cost.fits);
    CHECK(r.cost.fits_host);
  }
  // The same for any thread count.
  const SearchResult two = Search(s.model, host, s.training, Options(2));
  REQUIRE(two.top.size() == found.top.size());
  for (size_t i = 0; i < two.top.size(); ++i) {
    CHECK(two.top[i].plan == found.top[i].plan);
    CHECK(two.top[i].variant == found.top[i].variant);
  }
  CHECK(two.variants == found.variants);
  CHECK(two.fitting == found.fitting);
}

TEST_CASE("a host too small for the offloaded states is counted as host_memory_exceeded",
          "[planner][search][offload]") {
  const OneSmallGpu s;
  ClusterSpec host = WithHost(s.cluster);
  host.host.memory_bytes_per_node = 2'000'000'000;  // 2 GB: less than 14 bytes x 1.6B
  const SearchResult r = Search(s.model, host, s.training, Options(1));
  CHECK(r.knobs.host_memory_exceeded > 0);
  CHECK(r.removed_by_host_memory > 0);
  for (const RankedPlan& p : r.top) CHECK_FALSE(p.plan.offload_optimizer);
}

TEST_CASE("offload is not tried on plans that fit", "[planner][search][offload]") {
  // Plenty of memory: every valid plan fits, so no offload variant is evaluated.
  const ModelSpec model = SpecLlama(1024, 16, 4, 4096);
  const SearchResult r =
      Search(model, WithHost(H100Cluster(1)), Training(16, 1024), Options(1));
  CHECK(r.fitting == r.valid);
  CHECK(r.variants == 0);
}

TEST_CASE("tp_overlap is chosen per plan by its own trade-off", "[planner][search][overlap]") {
  const ModelSpec model = SpecLlama(4096, 32, 4, 16384);
  const TrainingSpec training = Training(16, 4096);
  ClusterSpec c = H100Cluster(1);
  c.gpu.comm_overlap_slowdown = 0;  // free overlap: on wherever tp > 1
  SearchOptions o = Options(1);
  o.top_k = 50;
  const SearchResult free = Search(model, c, training, o);
  CHECK(free.knobs.tp_overlap_off == 0);
  CHECK(free.knobs.tp_overlap_on > 0);
  for (const RankedPlan& r : free.top) CHECK(r.plan.tp_comm_overlap == (r.plan.tp > 1));
  // A 90% slowdown: TP over NVLink hides less than it costs, overlap is left off.
  c.gpu.comm_overlap_slowdown = 0.9;
  const SearchResult costly = Search(model, c, training, o);
  CHECK(costly.knobs.tp_overlap_off > 0);
  // dp_overlap=0 is dominated on every plan with dp*cp > 1 and never ranked.
  CHECK(costly.knobs.dp_overlap_dominated > 0);
  for (const RankedPlan& r : costly.top) CHECK(r.plan.dp_comm_overlap);
}

TEST_CASE("pinned choices hold on every candidate", "[planner][search][pins]") {
  const OneSmallGpu s;
  SearchOptions o = Options(1);
  o.space.pins = ParsePlanPins("offload_opt=1,offload_act=1");
  const SearchResult r = Search(s.model, WithHost(s.cluster), s.training, o);
  REQUIRE(!r.top.empty());
  for (const RankedPlan& p : r.top) {
    CHECK(p.plan.offload_optimizer);
    CHECK(p.plan.offload_activations);
  }
  CHECK(o.space.pins.ToString() == "offload_opt=1,offload_act=1");
  CHECK(ParsePlanPins("prefetch=2,dp_overlap=0").Without("prefetch").ToString() == "dp_overlap=0");
  CHECK_THROWS_AS(ParsePlanPins("prefetch=7"), InputError);
}

}  // namespace
}  // namespace meshplan
