// ScaleDown: a plan for a big cluster turned into a small run of the same layout on N local
// ranks (`meshplan shrink`), so its code paths (the same dp / tp / pp / cp / ep / ZeRO /
// schedule / recompute / offload choices) can be run and compared on one machine.
//
// What it keeps and what it changes (docs/commands.md#meshplan-shrink):
//  * the plan: every choice kept; the mesh reduced to N ranks by dividing dp first, then cp,
//    tp and pp, each by prime factors of world/N, none below 2 while another can still give
//    (ep follows dp: gcd(ep, dp'));
//  * the model: the same family (GQA or MHA, tied embeddings, MoE with its top-k and a
//    shared expert), tiny: head dim 32, at least 8 query heads (tiny-
//    llama's attention), widths divisible by tp,
//    2 layers per pipeline chunk, 2 routed experts per ep rank;
//  * the training: seq 64 (divisible by 2 cp and tp), 2 micro-batches per pipeline stage
//    (2 in all without pp), mbs 1, 4 steps; fp32 on a CPU (the executor's CPU precision),
//    the plan's precision on a GPU unless fp8 (bf16 then); meshplan's executor profile.
//  * what meshplan's executor does not build (planner/executor_support.h) made runnable:
//    recompute op -> selective, zb_h1 -> 1f1b, refused plan fields at their defaults, cp of
//    a mixture of experts folded into dp, no qk-norm / router bias / MLA, a llama block,
//    embeddings untied across pipeline stages.
// Every change is listed in ScaledDown::changes, in words, for the command to print.
// Throws InputError naming `--nproc` when N does not divide the plan's world size or the
// reduced plan breaks a rule (Validate); pure otherwise.
#pragma once

#include <string>
#include <vector>

#include "planner/cluster_spec.h"
#include "planner/training_setup.h"

namespace meshplan {

struct ScaledDown {
  PlanFile plan;                     // the small model, `cluster`, training and plan
  std::vector<std::string> changes;  // "dp 8 -> 2", "precision mixed -> fp32", ...
};

// `cluster`: the N-rank cluster to run on (its world size is the new plan's); `cpu`: its
// device is a CPU (fp32).
ScaledDown ScaleDown(const PlanFile& big, const ClusterSpec& cluster, bool cpu);

}  // namespace meshplan
