// The bounds meshplan puts on its input and on the work one command may do, in one place.
//
// Every bound is far above any real setup and far below where arithmetic, memory or time
// would break: a value past one is a typo or a hostile input, and is refused with an
// InputError naming the bound (exit code 2) instead of overflowing, allocating without
// limit or running for minutes. docs/limits.md lists each with its reason; keep the two in
// step.
#pragma once

#include <cstdint>

namespace meshplan {

// ---- Files ----
// Largest file any loader reads (configs, plan files, config.json, measured.json, sweep
// records). A measured.json of 1,000 ranks x 5,000 steps is about 100 MB; a parsed JSON
// document takes up to ~16x its file for a file of one-digit numbers (2 GB at the bound).
inline constexpr int64_t kMaxInputFileBytes = 128LL * 1024 * 1024;
// Deepest nesting of arrays / objects in a JSON file. Real files nest 4 deep; the limit is
// checked before the document is built, so deep input cannot exhaust the stack.
inline constexpr int kMaxJsonDepth = 64;
// Deepest nesting of sequences / mappings in a YAML file (real configs: 3).
inline constexpr int kMaxYamlDepth = 64;
// Most nodes a YAML document may expand to, each alias counting the nodes it repeats
// (an alias bomb of 9 levels of 10 aliases expands to 10^9). Real configs: ~60.
inline constexpr int64_t kMaxYamlNodes = 100'000;

// ---- Setups ----
// GPUs in a cluster (nodes x gpus_per_node, NxGPU) and each plan factor dp, tp, pp, cp.
inline constexpr int64_t kMaxGpus = 100'000'000;
// Sequences per optimizer step (--global-batch, training.global_batch) and the micro-batch.
inline constexpr int64_t kMaxGlobalBatch = 1'000'000'000;
// Tokens per sequence (--seq, training.seq_len).
inline constexpr int64_t kMaxSeqLen = 1'000'000'000;
// Tokens per optimizer step, global batch x sequence (the largest published runs: ~1.6e7).
inline constexpr int64_t kMaxTokensPerStep = 1'000'000'000'000;
// Virtual pipeline stages (vpp): at most one per layer, and layers are at most 1e6.
inline constexpr int64_t kMaxVirtualStages = 1'000'000;
// Layers of the first or last pipeline stage (the plan's stage split): a model has at most
// 1e6 layers.
inline constexpr int64_t kMaxStageLayers = 1'000'000;

// ---- Models ----
// Widths (hidden, ffn_hidden, vocab_size, head dims, ranks) and counts (layers, heads,
// experts) of a model, from any source: model YAML, config.json, validate rows. The
// largest published models are ~1e5 wide and ~1e2 deep; a search over 1e7 layers runs for
// minutes, and a width of 1e9 overflows the parameter count.
inline constexpr int64_t kMaxModelWidth = 100'000'000;
inline constexpr int64_t kMaxModelCount = 1'000'000;
// A model with more parameters than this is a typo; it also keeps the counts in int64.
inline constexpr double kMaxModelParams = 1e15;

// ---- Physical quantities ----
// The smallest value each rate, duration or fraction may take, in SI units. "> 0" alone
// lets 1e-320 through, and a time divided by it is infinite; each bound is 1,000x or more
// below any real hardware or run (docs/limits.md "Physical quantities").
inline constexpr double kMinBandwidthBps = 1e6;  // 1 MB/s: links, memory buses, host rates
inline constexpr double kMinFlops = 1e9;         // 1 GFLOP/s: a peak
inline constexpr double kMinEfficiency = 1e-3;   // 0.1%: a fraction of a peak or a bus
inline constexpr double kMinMemoryBytes = 1024.0 * 1024;  // 1 MiB: a GPU's or a node's memory
// A step of training, measured or published: 1 us to ~4 months.
inline constexpr double kMinStepTimeS = 1e-6;
inline constexpr double kMaxStepTimeS = 1e7;
// Throughput, measured: at least one token per kMaxStepTimeS, at most 1e15 tokens/s
// (1,000x a million GPUs at 1e6 each).
inline constexpr double kMinTokensPerS = 1e-7;
inline constexpr double kMaxTokensPerS = 1e15;
// Model FLOPs utilisation, predicted or measured: a fraction of the peak, at most 1.
inline constexpr double kMaxMfu = 1.0;

// ---- Work per command ----
// Candidates one plan search may judge (--bench: 6.6M for 530B on 5,120 GPUs in 0.2 s).
inline constexpr int64_t kMaxSearchCandidates = 10'000'000;
// Candidates all the searches of the no-fit advice may judge together.
inline constexpr int64_t kMaxAdviceCandidates = 2 * kMaxSearchCandidates;
// Plans search --simulate-top K may simulate (each up to kMaxSimOps ops).
inline constexpr int64_t kMaxSimulateTop = 100;
// Worker threads of a search (--threads); more than cores only adds overhead.
inline constexpr int64_t kMaxThreads = 1024;
// Intra-op threads of one CPU rank (meshplan calibrate --threads, a profile's threads_per_rank).
inline constexpr int64_t kMaxIntraOpThreads = 4096;
// Ops in one simulated step (about 130 bytes and 0.3 us each: 5M ops ~ 0.7 GB, ~2 s).
inline constexpr int64_t kMaxSimOps = 5'000'000;
// Ops in a simulated step's timeline (simulate --trace, the GUI's timeline): each span
// holds a label and becomes ~250 bytes of trace JSON (1M ops: ~250 MB, a few seconds).
inline constexpr int64_t kMaxTraceOps = 1'000'000;

}  // namespace meshplan
