#include "planner/attention_impl.h"

namespace meshplan {

const char* ToString(AttentionImpl impl) {
  switch (impl) {
    case AttentionImpl::kAuto: return "auto";
    case AttentionImpl::kNaive: return "naive";
    case AttentionImpl::kFused: return "fused";
  }
  return "?";
}

bool ParseAttentionImpl(const std::string& text, AttentionImpl* impl) {
  for (const AttentionImpl candidate : {AttentionImpl::kAuto, AttentionImpl::kNaive, AttentionImpl::kFused})
    if (text == ToString(candidate)) {
      *impl = candidate;
      return true;
    }
  return false;
}

AttentionImpl ResolveAttentionImpl(AttentionImpl requested, const FrameworkSpec& framework,
                                   Precision precision) {
  if (requested != AttentionImpl::kAuto) return requested;
  if (framework.attention != AttentionImpl::kAuto) return framework.attention;
  if (precision == Precision::kFp32) return AttentionImpl::kNaive;
  return AttentionImpl::kFused;
}

}  // namespace meshplan
