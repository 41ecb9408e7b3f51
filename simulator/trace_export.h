// Chrome / Perfetto trace of a simulated step (the "Trace Event Format" JSON that
// chrome://tracing and ui.perfetto.dev open).
//
// One process per simulated rank (pid = stage, named "stage S (rank R)"), one thread
// per stream (tid = SimStream index, named compute / dp / pp / cp / tp), and one
// complete event ("ph": "X") per op with ts and dur in microseconds and args: bytes
// (communication, sent by this rank), flops (compute), microbatch, chunk, layer, kind.
// Metadata events ("ph": "M") carry the names. Zero-length ops are left out.
// Needs SimResult::timeline (SimOptions::timeline). TraceFilter keeps a large step's trace
// small: the first micro-batches only (per-step ops, microbatch -1, always stay) and some
// stages only.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "simulator/simulate.h"

namespace meshplan {

struct TraceFilter {
  int64_t microbatches = -1;    // keep micro-batches 0 .. microbatches-1; -1: all
  std::vector<int64_t> stages;  // keep these stages; empty: all
  bool Keeps(const SimSpan& span) const;
  bool KeepsStage(int64_t stage) const;
};

// What WriteTrace wrote.
struct TraceFileStats {
  int64_t events = 0;  // complete events (ops), metadata left out
  int64_t bytes = 0;   // the file's size
};

// {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}; `title` goes to
// otherData.title (e.g. the plan string).
nlohmann::json TraceToJson(const SimResult& result, const std::string& title = "",
                           const TraceFilter& filter = {});

// Writes TraceToJson to `path`, event by event (no whole-trace document in memory), through
// AtomicFileWriter (planner/atomic_file.h): whole or not at all, and only to a new path or
// a regular file; throws InputError when the file cannot be written.
TraceFileStats WriteTrace(const SimResult& result, const std::string& path,
                          const std::string& title = "", const TraceFilter& filter = {});

}  // namespace meshplan
