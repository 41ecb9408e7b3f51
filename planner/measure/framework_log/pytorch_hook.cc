// The plain-PyTorch hook's JSON (docs/framework_logs.md "The PyTorch hook": a few lines a
// training script adds; scripts/pytorch_cpu_run.py is one). One file per rank:
//   {"format": "meshplan-pytorch-hook/1", "rank": R, "world_size": W, "device": D,
//    "step_times_s": [seconds of each step, warm-up included], "losses": [per step, optional],
//    "max_memory_allocated": torch.cuda.max_memory_allocated() or null (CPU),
//    "max_memory_reserved": torch.cuda.max_memory_reserved() or null (CPU)}
// D is "cpu" or torch.cuda.get_device_name(). Unknown keys are refused (a misspelt one would
// be lost).
#include <fmt/format.h>

#include <cmath>

#include "planner/json_input.h"
#include "planner/measure/framework_log/framework_log.h"

namespace meshplan {
namespace {

constexpr const char* kFormat = "meshplan-pytorch-hook/1";

using nlohmann::json;

[[noreturn]] void Fail(const std::string& text, const std::string& file, const std::string& field,
                       const std::string& message) {
  throw LocatedInJson(InputError({file}, field, message), text);
}

// A non-negative whole number, or 0 for null when `nullable`.
int64_t Count(const json& j, const std::string& key, bool nullable, const std::string& text,
              const std::string& file) {
  if (!j.contains(key)) Fail(text, file, key, "missing required field");
  if (nullable && j[key].is_null()) return 0;
  const std::optional<int64_t> v = JsonInt64(j[key]);
  if (!v || *v < 0)
    Fail(text, file, key, std::string("expected a non-negative whole number") +
                              (nullable ? " or null" : "") + ", got " + j[key].dump());
  return *v;
}

}  // namespace

LoggedRun ParsePytorchHook(const std::string& text, const std::string& file, const RunShape& shape) {
  const json j = ParseJson(text, file);
  if (!j.is_object() || !j.contains("format"))
    Fail(text, file, "format",
         std::string("expected the PyTorch hook's JSON object with \"format\": \"") + kFormat +
             "\" (docs/framework_logs.md)" +
             (text.find("\"median_step_s\"") != std::string::npos
                  ? "; this looks like meshplan's measured.json: pass --framework meshplan"
                  : ""));
  for (const auto& [key, value] : j.items())
    if (key != "format" && key != "rank" && key != "world_size" && key != "device" &&
        key != "step_times_s" && key != "losses" && key != "max_memory_allocated" &&
        key != "max_memory_reserved")
      Fail(text, file, key, "unknown field; expected: format, rank, world_size, device, "
                            "step_times_s, losses, max_memory_allocated, max_memory_reserved");
  if (j["format"] != kFormat)
    Fail(text, file, "format", std::string("expected \"") + kFormat + "\", got " + j["format"].dump());
  LoggedMemory memory;
  memory.rank = Count(j, "rank", false, text, file);
  const int64_t world = Count(j, "world_size", false, text, file);
  if (world != shape.world_size)
    Fail(text, file, "world_size", fmt::format("the run had {} ranks, the plan {}: this is not a "
                                               "log of that plan", world, shape.world_size));
  if (memory.rank >= world)
    Fail(text, file, "rank", fmt::format("rank {} is outside the run's {} ranks", memory.rank, world));
  memory.max_allocated_bytes = Count(j, "max_memory_allocated", true, text, file);
  memory.max_reserved_bytes = Count(j, "max_memory_reserved", true, text, file);
  LoggedRun run;
  if (!j.contains("device") || !j["device"].is_string() || j["device"].get<std::string>().empty())
    Fail(text, file, "device", "expected a string: \"cpu\" or torch.cuda.get_device_name()");
  run.device = j["device"].get<std::string>();
  if (!j.contains("step_times_s") || !j["step_times_s"].is_array() || j["step_times_s"].empty())
    Fail(text, file, "step_times_s", "expected a non-empty list of step times in seconds");
  const json& times = j["step_times_s"];
  const json empty = json::array();
  const json& losses = j.contains("losses") ? j["losses"] : empty;
  if (!losses.is_array() || (!losses.empty() && losses.size() != times.size()))
    Fail(text, file, "losses", fmt::format("expected a list of one loss per step ({} steps)", times.size()));
  for (size_t i = 0; i < times.size(); ++i) {
    LoggedSample sample;
    sample.step = static_cast<int64_t>(i) + 1;
    if (!times[i].is_number() || !(times[i].get<double>() > 0))
      Fail(text, file, fmt::format("step_times_s[{}]", i),
           "expected a positive number of seconds, got " + times[i].dump());
    sample.seconds = times[i].get<double>();
    if (!losses.empty()) {
      if (!losses[i].is_number() || !std::isfinite(losses[i].get<double>()) || losses[i].get<double>() < 0)
        Fail(text, file, fmt::format("losses[{}]", i),
             "expected a finite, non-negative loss, got " + losses[i].dump());
      sample.loss = losses[i].get<double>();
    }
    run.samples.push_back(sample);
  }
  run.memory.push_back(memory);
  return run;
}

}  // namespace meshplan
