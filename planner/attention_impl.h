// AttentionImpl's spellings and its resolution: the enum itself is part of a framework
// profile (planner/framework_spec.h), which sets what the core keeps for backward
// (planner/cost/activation_memory.h) and which kernel runs it.
#pragma once

#include <string>

#include "planner/framework_spec.h"
#include "planner/spellings.h"
#include "planner/training_spec.h"

namespace meshplan {

// Every value with its spelling, in the order error messages list them.
inline constexpr Spellings<AttentionImpl, 3> kAttentionImplSpellings{
    {{AttentionImpl::kFused, "fused"}, {AttentionImpl::kNaive, "naive"}, {AttentionImpl::kAuto, "auto"}}};

const char* ToString(AttentionImpl impl);  // auto | naive | fused
// "auto" | "naive" | "fused"; false for anything else.
bool ParseAttentionImpl(const std::string& text, AttentionImpl* impl);
// `requested` unless auto; else the framework's choice unless auto; else naive in fp32
// (no flash kernel for fp32) and fused otherwise.
AttentionImpl ResolveAttentionImpl(AttentionImpl requested, const FrameworkSpec& framework,
                                   Precision precision);

}  // namespace meshplan
