// `--headroom` is one flag with one range in every command that takes it (estimate,
// search; cli/setup_options.h AddHeadroomOption): runs the built binary.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli_run.h"

namespace meshplan {
namespace {

using test::CliResult;

// A small setup, so that search answers quickly whether or not a plan fits.
const char* kSmallSetup = "--model tiny-llama --cluster 2xH100 --global-batch 4 --seq 256";

TEST_CASE("estimate and search refuse the same out-of-range --headroom with exit 2",
          "[planner][cli]") {
  const std::string value = GENERATE("-0.1", "1", "1.5", "nan");
  for (const std::string command : {"estimate", "search"}) {
    const CliResult r =
        test::RunMeshplan(command + " " + kSmallSetup + " --headroom=" + value);
    INFO(command << " --headroom=" << value << "\n" << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("--headroom: must be in [0, 1), got " + value));
  }
}

TEST_CASE("estimate and search accept the same in-range --headroom", "[planner][cli]") {
  // 0.995 is the edge the two commands used to disagree on (estimate allowed up to 0.99).
  const std::string value = GENERATE("0", "0.5", "0.995");
  const CliResult estimate =
      test::RunMeshplan(std::string("estimate --format json ") + kSmallSetup + " --headroom " +
                            value, /*with_stderr=*/false);
  INFO(estimate.output);
  REQUIRE(estimate.exit_code == 0);
  CHECK(nlohmann::json::parse(estimate.output)["memory_headroom"] == std::stod(value));
  // Search exits 3 when the headroom leaves too little for any plan, never 2.
  const CliResult search =
      test::RunMeshplan(std::string("search --format json ") + kSmallSetup + " --headroom " +
                            value, /*with_stderr=*/false);
  INFO(search.output);
  REQUIRE((search.exit_code == 0 || search.exit_code == 3));
  CHECK(nlohmann::json::parse(search.output)["setup"]["headroom"] == std::stod(value));
}

}  // namespace
}  // namespace meshplan
