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
#include <optional>
#include <string>
#include <vector>

#include "planner/cluster_spec.h"
#include "planner/hardware_spec.h"
#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/training_setup.h"
#include "planner/training_spec.h"

namespace meshplan {

// The configs directory: $MESHPLAN_CONFIGS if set, else the source tree's configs/.
std::filesystem::path ConfigsDir();

// A name from configs/models/, a YAML path, or a Hugging Face config.json path (or a
// folder holding one). Relative paths are relative to the working directory.
ModelSpec LoadModel(const std::string& name_or_path);
// Hugging Face config.json (Llama/Mistral/Qwen fields: hidden_size, intermediate_size,
// num_attention_heads, num_key_value_heads, num_hidden_layers, vocab_size,
// tie_word_embeddings, max_position_embeddings) for model_type llama, mistral, qwen2
// (block llama), and GPT-2 (n_embd, n_layer, n_head, n_positions, n_inner; block gpt, tied).
ModelSpec LoadHfConfig(const std::string& path);
// A name (file stem or alias, any case) from configs/hardware/ or a YAML path.
GpuSpec LoadGpu(const std::string& name_or_path);
// The hardware file's network block (the defaults of NxGPU shorthand clusters) as one node:
// gpus_per_node, intra_node, inter_node, gpu = the hardware; nullopt when it has none.
std::optional<ClusterSpec> LoadGpuNetwork(const std::string& name_or_path);
// A name from configs/clusters/, a YAML path, or the shorthand "NxGPU"
// ("64xH100": N GPUs of configs/hardware/GPU, found by file name or alias, any case;
// nodes of the GPU's network.gpus_per_node (8 for H100), fewer than that: one node of N;
// otherwise N must be a multiple of it; tiers from the GPU's network block).
ClusterSpec LoadCluster(const std::string& name_or_path_or_shorthand);

// The same readers on text already in memory (what the file loaders above call after
// ReadInputFile, and what the fuzz targets in tests/fuzz/ call): `file` names the text in
// errors, gives the default name (its stem) and the folder that relative paths in it are
// relative to.
ModelSpec ModelFromYamlText(const std::string& text, const std::string& file);
ModelSpec HfConfigFromText(const std::string& text, const std::string& file);
GpuSpec GpuFromYamlText(const std::string& text, const std::string& file);
ClusterSpec ClusterFromYamlText(const std::string& text, const std::string& file);

// Names available in each configs/ folder (file stems, sorted).
std::vector<std::string> ListModels();
std::vector<std::string> ListGpus();
std::vector<std::string> ListClusters();

// Plan file sections: model, cluster (a name/path/NxGPU string, or an inline spec; relative
// paths are relative to the plan file), training {global_batch, seq_len, precision, steps,
// learning_rate, moe_aux_loss_coef, grad_accumulation}, plan {the keys of ParsePlanString; omitted keys keep their defaults}.
// Also runs Validate() and throws InputError naming the plan file on any violation. `run_by`:
// the framework that runs the plan instead of the file's (meshplan run and the comparison of
// its runs: the executor, whatever the plan was searched for), which it is validated under.
PlanFile LoadPlanFile(const std::string& path, const FrameworkSpec* run_by = nullptr);
PlanFile PlanFileFromText(const std::string& text, const std::string& file,
                          const FrameworkSpec* run_by = nullptr);
// The model and cluster sections by reference (a name or a path relative to the plan file)
// instead of inline; empty: inline, so the file is self-contained.
struct PlanFileReferences {
  std::string model;
  std::string cluster;
};
// LoadPlanFile(written) == plan_file (with references: when they name these specs).
std::string PlanFileToYaml(const PlanFile& plan_file, const PlanFileReferences& refs = {});
// A model as a configs/models file, a cluster (its GPU inline) as a configs/clusters file:
// LoadModel / LoadCluster of it == the spec.
std::string ModelToYaml(const ModelSpec& model);
std::string ClusterToYaml(const ClusterSpec& cluster);
// Atomic: writes <path>.tmp.<pid>, then renames it over `path`. InputError when it cannot.
void SavePlanFile(const std::string& path, const PlanFile& plan_file);

}  // namespace meshplan
