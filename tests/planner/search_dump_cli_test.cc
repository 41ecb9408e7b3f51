// `meshplan search --dump`: every evaluated candidate as CSV or JSON Lines, in grid order
// whatever the thread count, nothing half-written on error; and the --only pins of the
// knobs the grid gained (first_stage_layers, last_stage_layers, tp_overlap).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "planner/search/candidate_dump.h"
#include "tests/cli_run.h"

namespace meshplan {
namespace {

using test::CliResult;
using test::RunMeshplan;

const char* kSetup = "--model llama3-8b --cluster 64xH100 --global-batch 64";

std::filesystem::path TempPath(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("meshplan_dump_" + std::to_string(getpid()) + "_" + name);
}

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream s(text);
  for (std::string line; std::getline(s, line);) lines.push_back(line);
  return lines;
}

// Nothing named after `path` is left in its folder (no file, no temporary).
bool NothingLeft(const std::filesystem::path& path) {
  for (const auto& entry : std::filesystem::directory_iterator(path.parent_path()))
    if (entry.path().filename().string().rfind(path.filename().string(), 0) == 0) return false;
  return true;
}

TEST_CASE("search --dump all.csv: a header and one row per evaluated candidate, in grid order",
          "[planner][cli][search][dump]") {
  const auto csv = TempPath("all.csv");
  const CliResult r =
      RunMeshplan(std::string("search --format json ") + kSetup + " --dump '" + csv.string() + "'",
                  false);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.output);
  const std::vector<std::string> lines = Lines(ReadAll(csv));
  REQUIRE(lines.size() >= 2);
  std::string header;
  for (const std::string& c : CandidateDump::Columns()) header += (header.empty() ? "" : ",") + c;
  CHECK(lines[0] == header);
  // One row per evaluated candidate: the valid grid points and their prefetch / offload variants.
  CHECK(int64_t(lines.size()) - 1 == j["evaluated"].get<int64_t>());
  CHECK(j["dump"]["rows"] == j["evaluated"]);
  int64_t previous = -1;
  for (size_t i = 1; i < lines.size(); ++i) {
    const int64_t ordinal = std::stoll(lines[i].substr(0, lines[i].find(',')));
    CHECK(ordinal >= previous);  // a grid point's variants follow it with its ordinal
    CHECK(ordinal > previous - (lines[i].find("offload") != std::string::npos ||
                                        lines[i].find("prefetch=0") != std::string::npos
                                    ? 1
                                    : 0));
    previous = ordinal;
    CHECK(lines[i].find(",\"dp=") != std::string::npos);  // the plan string, quoted
  }
  CHECK(previous < j["candidates"].get<int64_t>());
  CHECK(NothingLeft(TempPath("all.csv.tmp")));
  std::filesystem::remove(csv);
}

TEST_CASE("search --dump all.jsonl: the same rows as JSON objects, the same for 1 and 2 threads",
          "[planner][cli][search][dump]") {
  const auto one = TempPath("one.jsonl"), two = TempPath("two.jsonl");
  REQUIRE(RunMeshplan(std::string("search ") + kSetup + " --threads 1 --dump '" + one.string() +
                      "'").exit_code == 0);
  const CliResult r = RunMeshplan(std::string("search ") + kSetup + " --threads 2 --dump '" +
                                  two.string() + "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("evaluated candidates to"));
  const std::string text = ReadAll(one);
  CHECK(text == ReadAll(two));
  const std::vector<std::string> lines = Lines(text);
  REQUIRE(!lines.empty());
  int64_t fitting = 0, best_ordinal = -1;
  double best = 0;
  for (const std::string& line : lines) {
    const nlohmann::json row = nlohmann::json::parse(line);
    REQUIRE(row.size() == CandidateDump::Columns().size());
    for (const std::string& key : CandidateDump::Columns()) CHECK(row.contains(key));
    if (!row["fits"].get<bool>()) {
      CHECK_THAT(row["reason"].get<std::string>(), Catch::Contains("needs"));
      continue;
    }
    ++fitting;
    CHECK(row["reason"] == "");
    CHECK(row["memory_bytes"].get<double>() > row["activations_bytes"].get<double>());
    if (row["tokens_per_s"].get<double>() > best) {
      best = row["tokens_per_s"].get<double>();
      best_ordinal = row["ordinal"].get<int64_t>();
    }
  }
  // The dump agrees with the ranking: the fastest fitting row is the search's best plan.
  const CliResult json = RunMeshplan(std::string("search --format json --top 1 ") + kSetup, false);
  const nlohmann::json j = nlohmann::json::parse(json.output);
  CHECK(fitting == j["fitting"].get<int64_t>());
  CHECK(best == Approx(j["top"][0]["cost"]["tokens_per_s"].get<double>()));
  CHECK(best_ordinal >= 0);
  std::filesystem::remove(one);
  std::filesystem::remove(two);
}

TEST_CASE("search --dump refuses an unknown extension and leaves nothing on error",
          "[planner][cli][search][dump]") {
  const auto txt = TempPath("all.txt");
  const CliResult bad =
      RunMeshplan(std::string("search ") + kSetup + " --dump '" + txt.string() + "'");
  INFO(bad.output);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("--dump") && Catch::Contains(".csv") &&
                             Catch::Contains(".jsonl"));
  CHECK(NothingLeft(txt));

  // No valid plan (exit 2): the dump is not committed, and its temporary is removed.
  const auto csv = TempPath("none.csv");
  const CliResult none = RunMeshplan(std::string("search ") + kSetup + " --only tp=3 --dump '" +
                                     csv.string() + "'");
  CHECK(none.exit_code == 2);
  CHECK(NothingLeft(csv));

  // A folder that does not exist: exit 2 naming the flag.
  const CliResult missing =
      RunMeshplan(std::string("search ") + kSetup + " --dump /nonexistent-dir/all.csv");
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.output, Catch::Contains("--dump"));
}

TEST_CASE("the --only pins fix the stage split and tp_overlap", "[planner][cli][search][pins]") {
  const std::string setup = "--model llama3.1-405b --cluster 1024xh100-ib --global-batch 256 "
                            "--format json --top 3";
  const CliResult split =
      RunMeshplan("search " + setup + " --only pp=16,first_stage_layers=7,last_stage_layers=7",
                  false);
  INFO(split.output);
  REQUIRE(split.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(split.output);
  CHECK(j["setup"]["only"] == "pp=16,first_stage_layers=7,last_stage_layers=7");
  for (const auto& t : j["top"]) {
    CHECK(t["fields"]["first_stage_layers"] == 7);
    CHECK(t["fields"]["last_stage_layers"] == 7);
  }
  const CliResult overlap = RunMeshplan("search " + setup + " --only tp=8,tp_overlap=1", false);
  INFO(overlap.output);
  REQUIRE(overlap.exit_code == 0);
  // Parsed into a variable: a range-for over parse(...)["top"] would iterate a destroyed
  // temporary.
  const nlohmann::json overlapping = nlohmann::json::parse(overlap.output);
  REQUIRE_FALSE(overlapping["top"].empty());
  for (const auto& t : overlapping["top"])
    CHECK_THAT(t["plan"].get<std::string>(), Catch::Contains("tp_overlap=1"));
  const CliResult bad = RunMeshplan("search " + setup + " --only first_stage_layers=0");
  CHECK(bad.exit_code == 2);
}

}  // namespace
}  // namespace meshplan
