#include "planner/attention_kernel.h"

namespace meshplan {

const char* ToString(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::kFlash2: return "flash2";
    case AttentionKernel::kFlash3: return "flash3";
    case AttentionKernel::kCudnn: return "cudnn";
  }
  return "?";
}

bool ParseAttentionKernel(const std::string& text, AttentionKernel* kernel) {
  for (const AttentionKernel candidate : kEveryAttentionKernel)
    if (text == ToString(candidate)) {
      *kernel = candidate;
      return true;
    }
  return false;
}

}  // namespace meshplan
