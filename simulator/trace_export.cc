#include "simulator/trace_export.h"

#include <fmt/format.h>

#include <stdexcept>

#include "planner/atomic_file.h"

namespace meshplan {
namespace {

// Calls emit(event) for each trace event in order: the stage and stream names, then one
// complete event per op that took time. One event at a time, so WriteTrace streams them.
template <typename Emit>
void ForEachTraceEvent(const SimResult& result, Emit emit) {
  for (const SimStage& stage : result.stages) {
    const int64_t pid = stage.stage;
    emit({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0},
          {"args", {{"name", fmt::format("stage {} (rank {})", stage.stage, stage.global_rank)}}}});
    emit({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 0},
          {"args", {{"sort_index", pid}}}});
    for (int s = 0; s < kNumSimStreams; ++s) {
      emit({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", s},
            {"args", {{"name", ToString(static_cast<SimStream>(s))}}}});
      emit({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", pid}, {"tid", s},
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
    emit({{"ph", "X"},
          {"name", span.label},
          {"cat", ToString(span.stream)},
          {"pid", span.stage},
          {"tid", static_cast<int>(span.stream)},
          {"ts", span.start_s * 1e6},
          {"dur", dur_us},
          {"args", std::move(args)}});
  }
}

nlohmann::json OtherData(const SimResult& result, const std::string& title) {
  nlohmann::json other = {{"step_time_s", result.time.total_s},
                          {"slowest_stage", result.slowest_stage}};
  if (!title.empty()) other["title"] = title;
  return other;
}

}  // namespace

nlohmann::json TraceToJson(const SimResult& result, const std::string& title) {
  nlohmann::json events = nlohmann::json::array();
  ForEachTraceEvent(result, [&events](nlohmann::json event) { events.push_back(std::move(event)); });
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData", OtherData(result, title)}};
}

void WriteTrace(const SimResult& result, const std::string& path, const std::string& title) {
  // The same document as TraceToJson, written event by event (no whole-trace DOM in memory)
  // into a temporary renamed over `path` once complete: a full disk leaves no half trace.
  AtomicFileWriter out(path);
  constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
  out.Write("{\"displayTimeUnit\":\"ms\",\"otherData\":" +
            OtherData(result, title).dump(-1, ' ', false, kReplace) + ",\"traceEvents\":[");
  bool first = true;
  ForEachTraceEvent(result, [&](const nlohmann::json& event) {
    out.Write((first ? "" : ",") + event.dump(-1, ' ', false, kReplace));
    first = false;
  });
  out.Write("]}\n");
  out.Commit();
}

}  // namespace meshplan
