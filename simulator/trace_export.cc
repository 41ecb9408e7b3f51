#include "simulator/trace_export.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "planner/atomic_file.h"

namespace meshplan {

bool TraceFilter::KeepsStage(int64_t stage) const {
  return stages.empty() || std::find(stages.begin(), stages.end(), stage) != stages.end();
}

bool TraceFilter::Keeps(const SimSpan& span) const {
  return KeepsStage(span.stage) && (microbatches < 0 || span.microbatch < microbatches);
}

namespace {

// Calls emit(event) for each trace event in order: the kept stages' and their streams' names,
// then one complete event per kept op that took time. One event at a time, so WriteTrace
// streams them.
template <typename Emit>
void ForEachTraceEvent(const SimResult& result, const TraceFilter& filter, Emit emit) {
  for (const SimStage& stage : result.stages) {
    if (!filter.KeepsStage(stage.stage)) continue;
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
    if (!(dur_us > 0) || !filter.Keeps(span)) continue;
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

nlohmann::json TraceToJson(const SimResult& result, const std::string& title,
                           const TraceFilter& filter) {
  nlohmann::json events = nlohmann::json::array();
  ForEachTraceEvent(result, filter, [&events](nlohmann::json event) { events.push_back(std::move(event)); });
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData", OtherData(result, title)}};
}

TraceFileStats WriteTrace(const SimResult& result, const std::string& path,
                          const std::string& title, const TraceFilter& filter) {
  // The same document as TraceToJson, written event by event (no whole-trace DOM in memory)
  // into a temporary renamed over `path` once complete: a full disk leaves no half trace.
  AtomicFileWriter out(path);
  TraceFileStats stats;
  auto write = [&out, &stats](const std::string& text) {
    out.Write(text);
    stats.bytes += static_cast<int64_t>(text.size());
  };
  constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
  write("{\"displayTimeUnit\":\"ms\",\"otherData\":" +
        OtherData(result, title).dump(-1, ' ', false, kReplace) + ",\"traceEvents\":[");
  bool first = true;
  ForEachTraceEvent(result, filter, [&](const nlohmann::json& event) {
    write((first ? "" : ",") + event.dump(-1, ' ', false, kReplace));
    first = false;
    if (event["ph"] == "X") ++stats.events;
  });
  write("]}\n");
  out.Commit();
  return stats;
}

}  // namespace meshplan
