#include "planner/attention_kernel.h"

namespace meshplan {

const char* ToString(AttentionKernel kernel) { return SpellingOf(kAttentionKernelSpellings, kernel); }

bool ParseAttentionKernel(const std::string& text, AttentionKernel* kernel) {
  return ParseSpelling(kAttentionKernelSpellings, text, kernel);
}

}  // namespace meshplan
