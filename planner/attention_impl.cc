#include "planner/attention_impl.h"

namespace meshplan {

const char* ToString(AttentionImpl impl) { return SpellingOf(kAttentionImplSpellings, impl); }

bool ParseAttentionImpl(const std::string& text, AttentionImpl* impl) {
  return ParseSpelling(kAttentionImplSpellings, text, impl);
}

AttentionImpl ResolveAttentionImpl(AttentionImpl requested, const FrameworkSpec& framework,
                                   Precision precision) {
  if (requested != AttentionImpl::kAuto) return requested;
  if (framework.attention != AttentionImpl::kAuto) return framework.attention;
  if (precision == Precision::kFp32) return AttentionImpl::kNaive;
  return AttentionImpl::kFused;
}

}  // namespace meshplan
