// reference_step IN.safetensors OUT.safetensors: the executor's side of the outside-reference
// tests (compare_with_transformers.py). Reads a Llama model's shape (metadata), its weights
// under the executor's names ("<group>.<slot>": embedding.wte, block0.wq, head.lm_head, ...)
// and token rows (steps*B, S+1); writes, under the same names:
//   loss, logits (B*S,V)      one forward of the first B rows (LlamaModel, tests/executor/model_pass.h)
//   grad.<group>.<slot>       d(loss)/d(weight) of that forward
//   param.<group>.<slot>      the weights after `steps` Trainer steps (one process, fp32,
//                             global batch B, ZeRO 0: the training loop and AdamW of `meshplan run`)
//   losses (steps)            the loss each step logged
// and the AdamW hyper-parameters the Trainer used as metadata. Exit 0; 1 with the reason.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "executor/data.h"
#include "executor/model/adamw.h"
#include "executor/model/param_layout.h"
#include "executor/parallel/device_mesh.h"
#include "executor/trainer.h"
#include "tests/executor/model_pass.h"
#include "tests/reference/safetensors_file.h"

namespace meshplan::test {
namespace {

// Row n of a (rows, S+1) int64 tensor is sequence n (rows must cover every step's batch).
class TensorTokens : public TokenSource {
 public:
  explicit TensorTokens(at::Tensor rows) : rows_(std::move(rows)) {}
  void Sequence(int64_t n, int64_t* out) const override {
    const at::Tensor row = rows_[n];
    std::copy_n(row.data_ptr<int64_t>(), rows_.size(1), out);
  }
  int64_t seq_len() const override { return rows_.size(1) - 1; }

 private:
  at::Tensor rows_;
};

std::string Exact(double x) {  // round-trips through Python's float()
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", x);
  return text;
}

int64_t MetaInt(const SafetensorsFile& in, const std::string& key) {
  return std::stoll(in.metadata.at(key));
}

ModelSpec ModelFrom(const SafetensorsFile& in) {
  ModelSpec m;
  m.name = "reference";
  m.vocab_size = MetaInt(in, "vocab_size");
  m.hidden = MetaInt(in, "hidden");
  m.layers = MetaInt(in, "layers");
  m.heads = MetaInt(in, "heads");
  m.kv_heads = MetaInt(in, "kv_heads");
  m.ffn_hidden = MetaInt(in, "ffn_hidden");
  m.tied_embeddings = MetaInt(in, "tied_embeddings") != 0;
  if (in.metadata.count("head_dim") != 0) m.attention_head_dim = MetaInt(in, "head_dim");  // 0: E/H
  return m;
}

// The flat buffer of each group, filled from the named weights.
std::vector<at::Tensor> FlatsFrom(const ParamLayout& layout, const SafetensorsFile& in) {
  std::vector<at::Tensor> flats;
  for (const ParamGroup& g : layout.groups) {
    at::Tensor flat = at::zeros({g.padded_numel});
    for (const ParamSlot& slot : g.slots) {
      const std::string name = g.name + "." + slot.name;
      if (!in.tensors.count(name)) throw std::runtime_error("input has no weight " + name);
      SlotView(flat, slot).copy_(in.tensors.at(name).view(slot.shape));
    }
    flats.push_back(flat);
  }
  return flats;
}

void PutGroups(const ParamLayout& layout, const std::vector<at::Tensor>& flats,
               const std::string& prefix, SafetensorsFile& out) {
  for (size_t g = 0; g < layout.groups.size(); ++g)
    for (const ParamSlot& slot : layout.groups[g].slots)
      out.tensors[prefix + layout.groups[g].name + "." + slot.name] = SlotView(flats[g], slot).clone();
}

void Run(const std::string& in_path, const std::string& out_path) {
  const SafetensorsFile in = ReadSafetensors(in_path);
  const ModelSpec m = ModelFrom(in);
  const int64_t B = MetaInt(in, "batch"), steps = MetaInt(in, "steps");
  const at::Tensor tokens = in.tensors.at("tokens");
  const int64_t S = tokens.size(1) - 1;
  const AttentionImpl attention =
      in.metadata.at("attention") == "fused" ? AttentionImpl::kFused : AttentionImpl::kNaive;
  const ParamLayout layout = BuildParamLayout(m, 1);
  const std::vector<at::Tensor> flats = FlatsFrom(layout, in);
  SafetensorsFile out;

  const at::Tensor batch = tokens.narrow(0, 0, B);
  const ModelPass pass = RunModelPass(m, layout, flats, batch.narrow(1, 0, S).contiguous(),
                                      batch.narrow(1, 1, S).contiguous(), Recompute::kNone, 1.0,
                                      attention);
  out.tensors["loss"] = at::full({}, pass.loss, at::kFloat);
  out.tensors["logits"] = pass.logits;
  PutGroups(layout, pass.grads, "grad.", out);

  TrainingSpec training;
  training.global_batch = B;
  training.seq_len = S;
  training.precision = Precision::kFp32;
  training.learning_rate = std::stod(in.metadata.at("lr"));
  ParallelPlan plan;
  plan.micro_batch = B;
  const DeviceMesh one(plan, 0, nullptr);
  const TensorTokens data(tokens);
  Trainer trainer(m, training, one, data, /*seed=*/1, nullptr);
  for (size_t g = 0; g < flats.size(); ++g) trainer.engine().Owned(int(g)).params.copy_(flats[g]);
  trainer.engine().SyncParamsFromShards();
  std::vector<float> losses;
  for (int64_t s = 0; s < steps; ++s) losses.push_back(float(trainer.Step().loss));
  std::vector<at::Tensor> trained;
  for (size_t g = 0; g < flats.size(); ++g) trained.push_back(trainer.engine().FullParamsCopy(int(g)));
  PutGroups(layout, trained, "param.", out);
  out.tensors["losses"] = at::tensor(losses);

  const AdamWOptions adamw;  // the Trainer's, but for lr (docs/executor.md: Training)
  out.metadata = {{"beta1", Exact(adamw.beta1)}, {"beta2", Exact(adamw.beta2)},
                  {"eps", Exact(adamw.eps)}, {"weight_decay", Exact(adamw.weight_decay)},
                  {"fused_adamw", FusedAdamWBuiltIn(at::kCPU) ? "1" : "0"}};
  WriteSafetensors(out_path, out);
}

}  // namespace
}  // namespace meshplan::test

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: reference_step IN.safetensors OUT.safetensors\n");
    return 2;
  }
  try {
    meshplan::test::Run(argv[1], argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reference_step: %s\n", e.what());
    return 1;
  }
  return 0;
}
