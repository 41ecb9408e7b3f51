// Micro-benchmarks of the executor's own ops, each returned as a CalibrationSample: the
// measured time beside the work the cost model counts for it (planner/cost/step_work.h), so
// planner/measure/calibration_fit.h can fit the rates the cost model times a step with.
// Shapes come from a ModelSpec and a list of (B, S) micro-batch shapes: matmuls, attention
// and the memory-bound ops of a step (each credited with the work BuildStepWork counts), plus
// the device's peaks (large GEMM FLOP/s, large copy bandwidth).
// Buffers are allocated once per sample and reused across repeats; nothing is kept.
// What each benchmark runs and the work it is credited with:
// docs/executor_internals.md#micro-benchmarks.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "executor/calibration/timing.h"
#include "planner/measure/calibration_fit.h"
#include "planner/model_spec.h"
#include "planner/training_spec.h"

namespace meshplan {

struct BenchShape {
  int64_t batch = 1;  // B
  int64_t seq = 0;    // S
  std::string ToString() const;  // "BxS"
};

// A sample and how often one training micro-batch of its shape runs it: L (layers) times
// the op's count per block, 1 for the head's and the embedding's ops, 0 for per-step work
// (the optimizer). RunCalibration weights the fit by these shares of a step.
// A segment sample (a whole block, the whole head) times what its ops take together inside
// a step; the op samples within it (`detail`) tell the kernel classes apart (matmul FLOPs,
// attention FLOPs and memory bytes all grow with the tokens, so segments alone cannot),
// and are fitted with a smaller weight (RunCalibration).
struct StepSample {
  CalibrationSample sample;
  std::string shape;          // BenchShape::ToString(); "" for per-step work
  double per_microbatch = 1;  // runs per micro-batch (0: once per step)
  bool detail = false;        // an op inside a segment sample of the same shape
};

struct BenchContext {
  at::Device device = at::kCPU;
  at::ScalarType dtype = at::kFloat;       // activations and weights (bf16 for bf16 / mixed on CUDA)
  Precision precision = Precision::kFp32;  // how the cost model counts the work
  TimingOptions timing;
};

std::vector<StepSample> BenchmarkMatmuls(const ModelSpec& model,
                                                const std::vector<BenchShape>& shapes,
                                                const BenchContext& ctx);
// Forward + backward of one block's attention core (what a step runs per block).
std::vector<StepSample> BenchmarkAttention(const ModelSpec& model,
                                                  const std::vector<BenchShape>& shapes,
                                                  const BenchContext& ctx);
std::vector<StepSample> BenchmarkMemoryOps(const ModelSpec& model,
                                                  const std::vector<BenchShape>& shapes,
                                                  const BenchContext& ctx);
// One sample: ZeroEngine::Step over the whole model's parameters (dp = 1, stage 0).
StepSample BenchmarkOptimizer(const ModelSpec& model, const BenchContext& ctx);
// The attention forward alone (what recompute replays): a check, not fitted.
CalibrationSample BenchmarkAttentionForward(const ModelSpec& model, const BenchShape& shape,
                                            const BenchContext& ctx);

// Segments: a whole block's forward and, separately, its backward (LlamaModel, recompute
// none; L each per micro-batch), and the head's (final norm, lm_head, cross-entropy; 1 each),
// each with the cost model's work for that phase. As in a step, the backward finds the
// weights and the saved activations out of the private caches (the forward that made them
// runs untimed before the flush).
std::vector<StepSample> BenchmarkBlock(const ModelSpec& model, const BenchShape& shape,
                                       const BenchContext& ctx);
std::vector<StepSample> BenchmarkHead(const ModelSpec& model, const BenchShape& shape,
                                      const BenchContext& ctx);

// FLOP/s of an n x n x n GEMM (2 n^3 FLOPs) in ctx.dtype.
double MeasureMatmulFlops(int64_t n, const BenchContext& ctx);
// Bytes read + written per second by copying a buffer of `bytes` into another.
double MeasureCopyBandwidth(int64_t bytes, const BenchContext& ctx);

}  // namespace meshplan
