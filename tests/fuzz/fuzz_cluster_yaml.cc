// Fuzz target: a cluster YAML (configs/clusters/) through ClusterFromYamlText (a `gpu:`
// name is looked up in configs/hardware/ like any cluster file's), and a cluster that loads
// through the analytic estimate of a 7B model, data parallel over all its GPUs.
#include "planner/config/config_loader.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_setups.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return meshplan::fuzz::RunOnText(data, size, [](const std::string& text) {
    const meshplan::ClusterSpec cluster =
        meshplan::ClusterFromYamlText(text, "fuzz/cluster.yaml");
    meshplan::TrainingSpec training;
    training.seq_len = 128;
    meshplan::ParallelPlan plan;
    plan.dp = cluster.world_size();
    training.global_batch = plan.dp;
    meshplan::fuzz::EstimateIfValid(meshplan::fuzz::Llama7b(), cluster, training, plan);
  });
}
