// A few training steps on one rank of a mesh, for the executor's "equals the single-process
// run" tests: what the rank logged and the parameters it ends with.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "executor/data.h"
#include "executor/model/param_layout.h"
#include "executor/parallel/device_mesh.h"
#include "executor/trainer.h"
#include "planner/model_spec.h"
#include "planner/training_spec.h"

namespace meshplan::test {

struct Trained {
  std::vector<double> losses;      // the logged (global-batch) loss of each step
  MeshCoords coords;               // where the rank sits on the mesh
  ParamLayout layout;              // this rank's groups: its stage chunks, its tp shard
  std::vector<at::Tensor> params;  // per group of `layout`: full over dp x cp, unpadded
};

// Learning rate 1e-2: large enough that 3 steps move every weight visibly.
inline TrainingSpec TinyTraining(int64_t global_batch, int64_t seq_len,
                                 Precision precision = Precision::kFp32) {
  TrainingSpec t;
  t.global_batch = global_batch;
  t.seq_len = seq_len;
  t.precision = precision;
  t.learning_rate = 1e-2;
  return t;
}

// `steps` optimizer steps on synthetic tokens (data_seed), weights from seed 42.
inline Trained TrainSteps(const ModelSpec& model, const TrainingSpec& training,
                          const DeviceMesh& mesh, int steps = 3, uint64_t data_seed = 5) {
  const auto data = MakeSyntheticTokens(data_seed, model.vocab_size, training.seq_len);
  Trainer trainer(model, training, mesh, *data, /*seed=*/42, nullptr);
  Trained out;
  for (int s = 0; s < steps; ++s) {
    const StepLog log = trainer.Step();
    if (log.step != s + 1) throw std::runtime_error("step numbering");
    out.losses.push_back(log.loss);
  }
  out.coords = mesh.coords();
  out.layout = trainer.engine().layout();
  for (size_t g = 0; g < out.layout.groups.size(); ++g)
    out.params.push_back(trainer.engine().FullParamsCopy(static_cast<int>(g)));
  return out;
}

// The rank's parameters by group name (pipeline stages hold different groups).
inline std::map<std::string, at::Tensor> ParamsByName(const Trained& trained) {
  std::map<std::string, at::Tensor> out;
  for (size_t g = 0; g < trained.layout.groups.size(); ++g)
    out[trained.layout.groups[g].name] = trained.params[g];
  return out;
}

}  // namespace meshplan::test
