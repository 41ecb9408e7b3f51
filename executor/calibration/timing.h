// Timing of one micro-benchmark call on a device: the median over repeats, after warm-up.
//
// On CPU every ATen op is synchronous and each repeat times one call with a steady
// clock. On CUDA the device is synchronised around a batch of back-to-back calls (so the
// sync latency is spread over the batch, as kernels run back to back inside a training
// step) and the batch time is divided by its size. Not thread-safe; fn must leave its
// inputs reusable (the same call is repeated).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "executor/device/training_device.h"  // SynchronizeDevice

namespace meshplan {

struct TimingOptions {
  double min_total_s = 0.05;  // keep repeating until this much time has been measured...
  int min_repeats = 3;        // ...and at least this many repeats
  int max_repeats = 200;
  double min_batch_s = 2e-3;  // CUDA: calls per timed batch so that a batch lasts this long
  // CPU: bytes written (untimed) before each repeat, to evict the private caches: inside a
  // training step an op finds its weights and saved activations out of them, not warm from
  // the previous repeat (0: none; DefaultFlushBytes() sizes it from the L2 cache).
  int64_t flush_bytes = 0;
};

// 8 x the L2 cache (sysconf), at least 8 MiB and at most 64 MiB.
int64_t DefaultFlushBytes();


// The median seconds of one call of fn, after one warm-up call. `before` (optional) runs
// untimed before every call (warm-up included), after the cache flush: it prepares what
// the call consumes and touches what the op would find warm in a training step (the
// activation the previous op just wrote).
double MedianSeconds(const std::function<void()>& fn, const at::Device& device,
                     const TimingOptions& options, const std::function<void()>& before = {});

// Reads every tensor once (a `before` callback: brings them into the caches).
void Touch(const std::vector<at::Tensor>& tensors);

// Writes `bytes` of a scratch buffer, evicting what the private caches hold (CPU; a no-op
// for 0 bytes). For `before` callbacks that prepare state first and flush after it.
void FlushCaches(int64_t bytes);

}  // namespace meshplan
