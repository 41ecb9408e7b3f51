#include "simulator/trace_export.h"

#include <fmt/format.h>

#include <fstream>
#include <stdexcept>

namespace meshplan {

nlohmann::json TraceToJson(const SimResult& result, const std::string& title) {
  nlohmann::json events = nlohmann::json::array();
  for (const SimStage& stage : result.stages) {
    const int64_t pid = stage.stage;
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0},
                      {"args", {{"name", fmt::format("stage {} (rank {})", stage.stage,
                                                     stage.global_rank)}}}});
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 0},
                      {"args", {{"sort_index", pid}}}});
    for (int s = 0; s < kNumSimStreams; ++s) {
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", s},
                        {"args", {{"name", ToString(static_cast<SimStream>(s))}}}});
      events.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", pid}, {"tid", s},
                        {"args", {{"sort_index", s}}}});
    }
  }
  for (const SimSpan& span : result.timeline) {
    const double dur_us = (span.end_s - span.start_s) * 1e6;
    if (!(dur_us > 0)) continue;
    nlohmann::json args = {{"kind", ToString(span.kind)}, {"microbatch", span.microbatch},
                           {"chunk", span.chunk}};
    if (span.layer >= 0) args["layer"] = span.layer;
    if (span.stream == SimStream::kCompute) {
      args["flops"] = span.flops;
    } else {
      args["bytes"] = span.bytes;
      args["buffer_bytes"] = span.buffer_bytes;
      args["tier"] = ToString(span.tier);
    }
    events.push_back({{"ph", "X"},
                      {"name", span.label},
                      {"cat", ToString(span.stream)},
                      {"pid", span.stage},
                      {"tid", static_cast<int>(span.stream)},
                      {"ts", span.start_s * 1e6},
                      {"dur", dur_us},
                      {"args", std::move(args)}});
  }
  nlohmann::json other = {{"step_time_s", result.time.total_s},
                          {"slowest_stage", result.slowest_stage}};
  if (!title.empty()) other["title"] = title;
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"otherData", other}};
}

void WriteTrace(const SimResult& result, const std::string& path, const std::string& title) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write the trace to " + path);
  out << TraceToJson(result, title).dump() << "\n";
  if (!out) throw std::runtime_error("cannot write the trace to " + path);
}

}  // namespace meshplan
