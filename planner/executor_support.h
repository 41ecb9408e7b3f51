// What meshplan's executor (`meshplan run`, executor/) can train, said without LibTorch so
// the planner side can ask too: `run` refuses a plan with these reasons before it builds a
// model, and `meshplan shrink` makes its scaled-down plan avoid them.
#pragma once

#include <string>
#include <vector>

#include "planner/model_spec.h"
#include "planner/training_setup.h"

namespace meshplan {

// Why this executor cannot run a plan that the planner's rules accept (Validate, checked
// first: heads, layers, the 2*cp sequence split...): a gpt block, tp not dividing the
// vocabulary (it is split across tp ranks), tied embeddings across pipeline stages, the
// zb_h1 schedule (weight gradients are not split from the backward), cp with a mixture of
// experts (routing is per micro-batch), every plan field planner/plan_fields.h marks
// kRefusedUnlessDefault at another value (tp_overlap=1, offload_act=1, offload_params=1,
// dp_overlap=0: what the executor would run instead is not that plan), and the model
// features of ModelLimitations. Every precision runs on every device
// (bf16 and mixed on a CPU too: slowly, for tests).
std::vector<std::string> ExecutorLimitations(const PlanFile& plan_file);
// The model features the executor's llama block does not build, so it would train a
// different model: multi-head latent attention, q/k norms, a router bias. The
// planner estimates them; `run` and `calibrate` refuse. (A head_dim other than hidden /
// heads runs: q and the output projection are H*D wide, tests/executor/tensor_parallel_test.cc.)
std::vector<std::string> ModelLimitations(const ModelSpec& model);

}  // namespace meshplan
