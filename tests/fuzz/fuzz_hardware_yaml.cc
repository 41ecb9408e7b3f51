// Fuzz target: a hardware YAML (configs/hardware/) through GpuFromYamlText, and a GPU that
// loads through the analytic estimate of a 7B model on a node of eight of it.
#include "planner/config/config_loader.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_setups.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return meshplan::fuzz::RunOnText(data, size, [](const std::string& text) {
    meshplan::ClusterSpec cluster = meshplan::fuzz::H100Node();
    cluster.gpu = meshplan::GpuFromYamlText(text, "fuzz/hardware.yaml");
    meshplan::TrainingSpec training;
    training.global_batch = 8;
    training.seq_len = 128;
    meshplan::ParallelPlan plan;
    plan.dp = 8;
    meshplan::fuzz::EstimateIfValid(meshplan::fuzz::Llama7b(), cluster, training, plan);
  });
}
