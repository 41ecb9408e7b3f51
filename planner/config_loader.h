// Loading and validating configs/: models, hardware, clusters and plan files.
//
// Every loader takes a name (looked up in the configs directory, e.g.
// "llama2-7b" -> configs/models/llama2-7b.yaml) or a path, validates every
// field and throws InputError with file, line, column, field and the expected
// value on bad input (unknown key, missing field, wrong type, zero/negative or
// overflowing value, heads not divisible by kv_heads, ...). Units in the YAML
// keys (GB, TFLOPs, GBps, us) are converted to SI once, here.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "planner/cluster_spec.h"
#include "planner/hardware_spec.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/training_spec.h"

namespace meshplan {

// The configs directory: $MESHPLAN_CONFIGS if set, else the source tree's configs/.
std::filesystem::path ConfigsDir();

// A name from configs/models/, a YAML path, or a Hugging Face config.json path.
ModelSpec LoadModel(const std::string& name_or_path);
// Hugging Face config.json (Llama/Mistral/Qwen fields: hidden_size, intermediate_size,
// num_attention_heads, num_key_value_heads, num_hidden_layers, vocab_size,
// tie_word_embeddings, max_position_embeddings).
ModelSpec LoadHfConfig(const std::string& path);
// A name from configs/hardware/ or a YAML path.
GpuSpec LoadGpu(const std::string& name_or_path);
// A name from configs/clusters/, a YAML path, or the shorthand "NxGPU"
// ("64xH100": N GPUs of configs/hardware/GPU, nodes of 8, the GPU's default network).
ClusterSpec LoadCluster(const std::string& name_or_path_or_shorthand);

// Names available in each configs/ folder (file stems, sorted).
std::vector<std::string> ListModels();
std::vector<std::string> ListGpus();
std::vector<std::string> ListClusters();

// A self-contained plan: what `meshplan search --out` writes and `run` / `compare` read.
struct PlanFile {
  ModelSpec model;
  ClusterSpec cluster;
  TrainingSpec training;
  ParallelPlan plan;
};
PlanFile LoadPlanFile(const std::string& path);
std::string PlanFileToYaml(const PlanFile& plan_file);  // LoadPlanFile(written) == plan_file
void SavePlanFile(const std::string& path, const PlanFile& plan_file);

}  // namespace meshplan
