// Fuzz target: a Hugging Face config.json through HfConfigFromText (ParseJson, then the
// llama / mistral / qwen2 / gpt2 readers and the model shape checks), and a model that
// loads through the analytic estimate.
#include "planner/config/config_loader.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_setups.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return meshplan::fuzz::RunOnText(data, size, [](const std::string& text) {
    meshplan::fuzz::EstimateModel(meshplan::HfConfigFromText(text, "fuzz/config.json"));
  });
}
