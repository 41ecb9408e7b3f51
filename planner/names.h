// The one spelling of every enum value, used by YAML files, flags, JSON and tables.
//
// Parse* return false on an unknown name; Allowed* list the accepted spellings
// for error messages ("one of: none, selective, full").
#pragma once

#include <string>

#include "planner/model_spec.h"
#include "planner/parallel_plan.h"
#include "planner/training_spec.h"

namespace meshplan {

const char* ToString(BlockKind kind);            // llama | gpt
const char* ToString(FfnActivation activation);  // swiglu | squared-relu
const char* ToString(Precision precision);       // bf16 | mixed | fp32 | fp8
const char* ToString(Recompute recompute);       // none | selective | full | op | every
std::string ToString(const RecomputePolicy& policy);  // the above, every:N for kEvery
const char* ToString(PipelineSchedule schedule); // gpipe | 1f1b | interleaved | zb_h1
const char* ToString(GradAccumulation mode);     // fused | separate

bool ParseBlockKind(const std::string& name, BlockKind* out);
bool ParseFfnActivation(const std::string& name, FfnActivation* out);
bool ParsePrecision(const std::string& name, Precision* out);
// none | selective | full | op | every:N (N an integer >= 2: every:1 is full, refused).
bool ParseRecompute(const std::string& name, RecomputePolicy* out);
bool ParsePipelineSchedule(const std::string& name, PipelineSchedule* out);
bool ParseGradAccumulation(const std::string& name, GradAccumulation* out);

// ASCII lower case: names, flags and device strings are matched case-insensitively.
std::string Lower(std::string text);

const char* AllowedBlockKinds();
const char* AllowedFfnActivations();
const char* AllowedPrecisions();
const char* AllowedRecomputes();
const char* AllowedPipelineSchedules();
const char* AllowedGradAccumulations();

}  // namespace meshplan
