// Fuzz target: measured.json (what `meshplan run` writes, what `meshplan compare` reads)
// through MeasurementFromText.
#include "planner/measure/measurement.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return meshplan::fuzz::RunOnText(data, size, [](const std::string& text) {
    meshplan::MeasurementFromText(text, "fuzz/measured.json");
  });
}
