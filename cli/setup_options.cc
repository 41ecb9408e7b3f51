#include "cli/setup_options.h"

#include "planner/config_loader.h"
#include "planner/input_error.h"
#include "planner/names.h"

namespace meshplan {

void AddSetupOptions(CLI::App* command, SetupOptions* options) {
  command->add_option("--model", options->model,
                      "model: a name from configs/models/, a YAML file or a HF config.json")
      ->capture_default_str();
  command->add_option("--cluster", options->cluster,
                      "cluster: a name from configs/clusters/, a YAML file, or NxGPU (e.g. 64xH100)")
      ->capture_default_str();
  command->add_option("--global-batch", options->global_batch, "sequences per optimizer step")
      ->capture_default_str();
  command->add_option("--seq", options->seq, "sequence length in tokens")->capture_default_str();
  command->add_option("--precision", options->precision, "bf16 | mixed | fp32")
      ->capture_default_str();
}

Setup ResolveSetup(const SetupOptions& options) {
  Setup setup;
  setup.model = LoadModel(options.model);
  setup.cluster = LoadCluster(options.cluster);
  const InputLocation flags{"<command line>"};
  if (options.global_batch <= 0)
    throw InputError(flags, "--global-batch", "must be a positive number of sequences, got " +
                                                  std::to_string(options.global_batch));
  if (options.seq <= 0)
    throw InputError(flags, "--seq", "must be a positive number of tokens, got " +
                                         std::to_string(options.seq));
  setup.training.global_batch = options.global_batch;
  setup.training.seq_len = options.seq;
  if (!ParsePrecision(options.precision, &setup.training.precision))
    throw InputError(flags, "--precision", "expected one of: " + std::string(AllowedPrecisions()) +
                                               "; got '" + options.precision + "'");
  return setup;
}

void AddFormatOption(CLI::App* command, std::string* format) {
  command->add_option("--format", *format, "output format: table | json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
}

}  // namespace meshplan
