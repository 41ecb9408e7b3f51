#include "planner/cost/collective_position.h"

namespace meshplan {

const char* ToString(CollectivePosition position) {
  switch (position) {
    case CollectivePosition::kBeforePart: return "before_part";
    case CollectivePosition::kBeforeAttention: return "before_attention";
    case CollectivePosition::kDuringAttention: return "during_attention";
    case CollectivePosition::kAfterAttention: return "after_attention";
    case CollectivePosition::kBeforeMlp: return "before_mlp";
    case CollectivePosition::kExpertDispatch: return "expert_dispatch";
    case CollectivePosition::kExpertCombine: return "expert_combine";
    case CollectivePosition::kAfterMlp: return "after_mlp";
    case CollectivePosition::kEmbeddingOutput: return "embedding_output";
    case CollectivePosition::kLmHeadInput: return "lm_head_input";
    case CollectivePosition::kInLoss: return "in_loss";
    case CollectivePosition::kAfterPart: return "after_part";
    case CollectivePosition::kAfterOptimizer: return "after_optimizer";
  }
  return "?";
}

}  // namespace meshplan
