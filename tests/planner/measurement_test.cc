// measured.json: combining rank results, the derived figures, and the JSON round trip.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "planner/input_error.h"
#include "planner/measure/measurement.h"

namespace meshplan {
namespace {

RankMeasurement Rank(int r, std::vector<double> times, int64_t peak) {
  RankMeasurement m;
  m.rank = r;
  m.step_times_s = std::move(times);
  m.losses = {5.0, 4.5, 4.25, 4.0};
  m.resident_bytes = 100;
  m.peak_memory_bytes = peak;
  m.phase_peaks = {{"forward", peak - 10}, {"backward", peak}};
  return m;
}

TEST_CASE("median after warm-up and tokens per second (divide, never multiply)",
          "[planner][measurement]") {
  CHECK(MedianAfterWarmup({9, 1, 3, 2}, 1) == 2);
  CHECK(MedianAfterWarmup({9, 1, 3, 2, 4}, 1) == 2.5);
  CHECK(MedianAfterWarmup({9}, 1) == 0);
  // 3 timed steps of 1000 tokens in 1 + 3 + 2 = 6 s.
  CHECK(TokensPerSecond({9, 1, 3, 2}, 1, 1000) == Approx(500.0));
}

TEST_CASE("ranks combine into the slowest step time and a peak per rank",
          "[planner][measurement]") {
  MeasurementEnvironment env;
  env.world_size = 2;
  const Measurement m = CombineRanks(env, 1, 1000, {Rank(0, {5, 1, 2, 1}, 300), Rank(1, {5, 2, 1, 1}, 310)});
  CHECK(m.step_times_s == std::vector<double>{5, 2, 2, 1});
  CHECK(m.median_step_s == 2);
  CHECK(m.tokens_per_s == Approx(3000.0 / 5.0));
  CHECK(m.peak_memory_bytes == std::vector<int64_t>{300, 310});
  CHECK(m.max_peak_memory_bytes() == 310);
  CHECK_THROWS(CombineRanks(env, 1, 1000, {Rank(0, {1, 1, 1, 1}, 1), Rank(1, {1, 1}, 1)}));
  CHECK_THROWS(CombineRanks(env, 1, 1000, {Rank(1, {1, 1, 1, 1}, 1)}));
}

TEST_CASE("measured.json round-trips and names a bad field", "[planner][measurement]") {
  MeasurementEnvironment env;
  env.device = "cpu";
  env.libtorch_version = "1.13.0";
  env.world_size = 2;
  env.model = "tiny";
  env.plan = "dp=2";
  env.precision = "fp32";
  const Measurement m = CombineRanks(env, 1, 1000, {Rank(0, {5, 1, 2, 1}, 300), Rank(1, {5, 2, 1, 1}, 310)});
  CHECK(MeasurementFromJson(MeasurementToJson(m), "x") == m);

  const auto path = std::filesystem::temp_directory_path() / ("measured_" + std::to_string(::getpid()) + ".json");
  nlohmann::json broken = MeasurementToJson(m);
  broken["ranks"][1]["peak_memory_bytes"] = "lots";
  std::ofstream(path) << broken.dump();
  CHECK_THROWS_WITH(LoadMeasurement(path.string()),
                    Catch::Contains("ranks[1].peak_memory_bytes") && Catch::Contains("an integer"));
  std::ofstream(path) << "{not json";
  CHECK_THROWS_AS(LoadMeasurement(path.string()), InputError);
  std::filesystem::remove(path);
  CHECK_THROWS_AS(LoadMeasurement(path.string()), InputError);
}

TEST_CASE("measured.json: the attention core and reserved bytes, optional in older files",
          "[planner][measurement]") {
  MeasurementEnvironment env;
  env.device = "NVIDIA H100 80GB HBM3";
  env.world_size = 1;
  env.precision = "mixed";
  env.attention = "fused";
  env.attention_kernel = "cudnn";
  env.adamw = "fused";
  RankMeasurement rank = Rank(0, {5, 1, 2, 1}, 300);
  rank.peak_reserved_bytes = 512;
  const Measurement m = CombineRanks(env, 1, 1000, {rank});
  const nlohmann::json json = MeasurementToJson(m);
  CHECK(json["environment"]["attention"] == "fused");
  CHECK(json["environment"]["attention_kernel"] == "cudnn");
  CHECK(json["ranks"][0]["peak_reserved_bytes"] == 512);
  CHECK(MeasurementFromJson(json, "x") == m);

  nlohmann::json older = json;  // written before these fields existed
  older["environment"].erase("attention");
  older["environment"].erase("adamw");
  older["environment"].erase("attention_kernel");
  older["ranks"][0].erase("peak_reserved_bytes");
  const Measurement read = MeasurementFromJson(older, "old.json");
  CHECK(read.environment.attention.empty());
  CHECK(read.environment.adamw.empty());
  CHECK(read.environment.attention_kernel.empty());
  CHECK(read.ranks[0].peak_reserved_bytes == 0);

  nlohmann::json wrong = json;
  wrong["ranks"][0]["peak_reserved_bytes"] = "much";
  CHECK_THROWS_WITH(MeasurementFromJson(wrong, "w.json"),
                    Catch::Contains("ranks[0].peak_reserved_bytes") && Catch::Contains("an integer"));
}

TEST_CASE("measured.json: the offloaded optimizer's host bytes, optional, written when set",
          "[planner][measurement][offload]") {
  MeasurementEnvironment env;
  env.device = "cpu";
  env.world_size = 1;
  env.precision = "fp32";
  RankMeasurement rank = Rank(0, {5, 1, 2, 1}, 300);
  const nlohmann::json without = MeasurementToJson(CombineRanks(env, 1, 1000, {rank}));
  CHECK_FALSE(without["ranks"][0].contains("host_optimizer_bytes"));  // older readers see nothing new
  CHECK(MeasurementFromJson(without, "old.json").ranks[0].host_optimizer_bytes == 0);
  rank.host_optimizer_bytes = 4096;
  const Measurement m = CombineRanks(env, 1, 1000, {rank});
  const nlohmann::json json = MeasurementToJson(m);
  CHECK(json["ranks"][0]["host_optimizer_bytes"] == 4096);
  CHECK(MeasurementFromJson(json, "x") == m);
  CHECK_THAT(FormatMeasurementSummary(m), Catch::Contains("host (offloaded optimizer)"));
  nlohmann::json wrong = json;
  wrong["ranks"][0]["host_optimizer_bytes"] = -1;
  CHECK_THROWS_WITH(MeasurementFromJson(wrong, "w.json"),
                    Catch::Contains("ranks[0].host_optimizer_bytes"));
}

}  // namespace
}  // namespace meshplan

namespace meshplan {
namespace {

TEST_CASE("measured.json of emulated ranks: only those ranks, ascending, and their comm mode",
          "[planner][measurement][emulate]") {
  MeasurementEnvironment env;
  env.world_size = 4;
  const Measurement m =
      CombineRanks(env, 1, 1000, {Rank(1, {5, 1, 2, 1}, 300), Rank(3, {5, 2, 1, 1}, 310)}, "model");
  CHECK(m.emulated_comm == "model");
  CHECK(m.peak_memory_bytes == std::vector<int64_t>{300, 310});
  CHECK(m.step_times_s == std::vector<double>{5, 2, 2, 1});
  CHECK(MeasurementFromJson(MeasurementToJson(m), "x") == m);
  // The summary prints what the emulated ranks measured, labels the modelled part, and gives
  // no tokens/s figure for a step it did not run.
  const std::string summary = FormatMeasurementSummary(m);
  CHECK_THAT(summary, Catch::Contains("rank 3: peak memory") &&
                          Catch::Contains("communication: model") &&
                          Catch::Contains("measured compute + modelled communication") &&
                          Catch::Contains("2 of 4 rank(s)") && Catch::Contains("not measured"));
  CHECK_THAT(summary, !Catch::Contains(fmt::format("{:.1f} tokens/s", m.tokens_per_s)) &&
                          !Catch::Contains("measured 4 steps"));
  MeasurementEnvironment whole = env;
  whole.world_size = 1;
  const Measurement real = CombineRanks(whole, 1, 1000, {Rank(0, {5, 1, 2, 1}, 300)});
  CHECK_THAT(FormatMeasurementSummary(real),
             Catch::Contains(fmt::format("{:.1f} tokens/s", real.tokens_per_s)));
  // Out of order, or outside the world.
  CHECK_THROWS(CombineRanks(env, 1, 1000, {Rank(3, {1, 1, 1, 1}, 1), Rank(1, {1, 1, 1, 1}, 1)}, "zero"));
  CHECK_THROWS(CombineRanks(env, 1, 1000, {Rank(4, {1, 1, 1, 1}, 1)}, "zero"));

  nlohmann::json bad = MeasurementToJson(m);
  bad["emulated_comm"] = "fast";
  CHECK_THROWS_WITH(MeasurementFromJson(bad, "x"),
                    Catch::Contains("emulated_comm") && Catch::Contains("zero or model"));
  bad = MeasurementToJson(m);
  bad["peak_memory_bytes"] = {1, 2, 3, 4};
  CHECK_THROWS_WITH(MeasurementFromJson(bad, "x"),
                    Catch::Contains("peak_memory_bytes") && Catch::Contains("one per emulated rank"));
  bad = MeasurementToJson(m);
  bad["ranks"][1]["rank"] = 7;
  CHECK_THROWS_WITH(MeasurementFromJson(bad, "x"), Catch::Contains("ranks[1].rank"));
}

}  // namespace
}  // namespace meshplan
