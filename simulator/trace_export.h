// Chrome / Perfetto trace of a simulated step (the "Trace Event Format" JSON that
// chrome://tracing and ui.perfetto.dev open).
//
// One process per simulated rank (pid = stage, named "stage S (rank R)"), one thread
// per stream (tid = SimStream index, named compute / dp / pp / cp / tp), and one
// complete event ("ph": "X") per op with ts and dur in microseconds and args: bytes
// (communication, sent by this rank), flops (compute), microbatch, chunk, layer, kind.
// Metadata events ("ph": "M") carry the names. Zero-length ops are left out.
// Needs SimResult::timeline (SimOptions::timeline).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "simulator/simulate.h"

namespace meshplan {

// {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}; `title` goes to
// otherData.title (e.g. the plan string).
nlohmann::json TraceToJson(const SimResult& result, const std::string& title = "");

// Writes TraceToJson to `path`, event by event (no whole-trace document in memory), through
// AtomicFileWriter (planner/atomic_file.h): whole or not at all, and only to a new path or
// a regular file; throws InputError when the file cannot be written.
void WriteTrace(const SimResult& result, const std::string& path, const std::string& title = "");

}  // namespace meshplan
