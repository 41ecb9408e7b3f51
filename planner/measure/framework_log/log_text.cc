#include "planner/measure/framework_log/log_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace meshplan {
namespace {

// The text without ANSI colour escapes (ESC '[' parameters 'm').
std::string WithoutColours(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b' && i + 1 < s.size() && s[i + 1] == '[') {
      size_t j = i + 2;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == ';')) ++j;
      if (j < s.size() && s[j] == 'm') {
        i = j;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

// "[rank12]:" at the start (torchrun --tee 3 --role rank): 12, and the rest of the line.
int64_t TakeRankPrefix(std::string* s) {
  if (s->rfind("[rank", 0) != 0) return -1;
  size_t i = 5;
  int64_t rank = 0;
  while (i < s->size() && std::isdigit(static_cast<unsigned char>((*s)[i])) && rank < 1'000'000)
    rank = rank * 10 + ((*s)[i++] - '0');
  if (i == 5 || s->compare(i, 2, "]:") != 0) return -1;
  s->erase(0, i + 2);
  return rank;
}

// The field a label names in errors: the label without its trailing ':', '=' and spaces
// ("elapsed time per iteration (ms): " -> "elapsed time per iteration (ms)").
std::string FieldOf(std::string_view label) {
  return std::string(label.substr(0, label.find_last_not_of(": =") + 1));
}

}  // namespace

std::vector<LogLine> LogLines(const std::string& text, const std::string& file) {
  std::vector<LogLine> lines;
  size_t start = 0;
  for (int number = 1; start < text.size(); ++number) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view raw(text.data() + start, end - start);
    for (const char c : raw) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 && c != '\t' && c != '\r' && c != '\x1b')
        throw InputError({file, number}, "log",
                         fmt::format("binary data (byte 0x{:02x}); expected a text log", u));
    }
    LogLine line;
    line.number = number;
    line.text = WithoutColours(raw);
    if (!line.text.empty() && line.text.back() == '\r') line.text.pop_back();
    line.rank = TakeRankPrefix(&line.text);
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

std::optional<double> NumberAfter(const LogLine& line, std::string_view label,
                                  const std::string& file, std::string_view then, bool commas) {
  const std::string& s = line.text;
  const size_t at = s.find(label);
  if (at == std::string::npos) return std::nullopt;
  size_t i = at + label.size();
  while (i < s.size() && s[i] == ' ') ++i;
  // strtod reads the number and stops at its unit ("5.00GiB"); commas are dropped first.
  std::string rest = s.substr(i, 64);
  if (commas) {
    size_t k = 0;
    while (k < rest.size() && (std::isdigit(static_cast<unsigned char>(rest[k])) || rest[k] == ',' || rest[k] == '.'))
      if (rest[k] == ',') rest.erase(k, 1);
      else ++k;
  }
  char* parsed_end = nullptr;
  const double value = std::strtod(rest.c_str(), &parsed_end);
  const size_t used = static_cast<size_t>(parsed_end - rest.c_str());
  const std::string field = FieldOf(label);
  if (used == 0 || !std::isfinite(value) || value < 0)
    throw InputError({file, line.number, static_cast<int>(i) + 1}, field,
                     fmt::format("expected a finite, non-negative number after '{}', got '{}'",
                                 label, s.substr(i, std::min(s.find(' ', i), i + 16) - i)));
  // The end of the number in the line (commas count).
  size_t end = i;
  for (size_t digits = 0; end < s.size() && digits < used; ++end)
    if (!(commas && s[end] == ',')) ++digits;
  size_t after = end;
  if (!then.empty()) {
    while (after < s.size() && s[after] == ' ') ++after;
    if (s.compare(after, then.size(), then) != 0)
      throw InputError({file, line.number, static_cast<int>(after) + 1}, field,
                       fmt::format("expected '{}' after the number (is the line cut short?)", then));
  }
  return value;
}

double RequiredNumberAfter(const LogLine& line, std::string_view label, const std::string& file,
                           const std::string& what, std::string_view then, bool commas) {
  if (std::optional<double> v = NumberAfter(line, label, file, then, commas)) return *v;
  throw InputError({file, line.number}, FieldOf(label),
                   fmt::format("{} without '{}' (is the line cut short?)", what, label));
}

int64_t RequiredIntAfter(const LogLine& line, std::string_view label, const std::string& file,
                         const std::string& what, std::string_view then) {
  const double v = RequiredNumberAfter(line, label, file, what, then);
  if (v != std::floor(v) || v > 1e15)
    throw InputError({file, line.number}, FieldOf(label),
                     fmt::format("expected a whole number after '{}', got {}", label, v));
  return static_cast<int64_t>(v);
}

int64_t RequiredBytesAfter(const LogLine& line, std::string_view label, double unit_bytes,
                           const std::string& file, const std::string& what, std::string_view then) {
  constexpr double kEiB = 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0;
  const double bytes = RequiredNumberAfter(line, label, file, what, then) * unit_bytes;
  if (bytes >= kEiB)
    throw InputError({file, line.number}, FieldOf(label),
                     fmt::format("{:g} bytes after '{}' is 1 EiB or more: expected a device's memory",
                                 bytes, label));
  return static_cast<int64_t>(bytes);
}

LoggedMemory& RankedSamples::Add(const LogLine& line, const LoggedSample& sample,
                                 const std::string& file, const std::string& field) {
  const int64_t rank = std::max<int64_t>(line.rank, 0);
  std::vector<LoggedSample>& mine = samples_[rank];
  if (!mine.empty() && sample.step <= mine.back().step)
    throw InputError({file, sample.line}, field,
                     fmt::format("{} {} of rank {} after its {} {} (line {}): expected increasing "
                                 "steps, one run per log; the lines of several ranks need "
                                 "torchrun's '[rankN]:' prefix (--tee 3 --role rank)",
                                 field, sample.step, rank, field, mine.back().step, mine.back().line));
  mine.push_back(sample);
  LoggedMemory& m = memory_[rank];
  m.rank = rank;
  return m;
}

LoggedRun RankedSamples::Run() const {
  LoggedRun run;
  if (!samples_.empty()) run.samples = samples_.begin()->second;
  for (const auto& [rank, m] : memory_) run.memory.push_back(m);
  return run;
}

std::string GuessLogFormat(const std::string& text) {
  if (text.find("elapsed time per iteration (ms)") != std::string::npos) return "megatron";
  if (text.find("CurrSamplesPerSec=") != std::string::npos) return "deepspeed";
  if ((text.find("tps:") != std::string::npos || text.find("wps:") != std::string::npos) &&
      text.find("step:") != std::string::npos)
    return "torchtitan";
  if (text.find("meshplan-pytorch-hook") != std::string::npos) return "pytorch-hook";
  if (text.find("\"median_step_s\"") != std::string::npos) return "meshplan";
  return "";
}

void ThrowNoTimingLine(const std::string& text, const std::string& file, const std::string& format,
                       const std::string& expected) {
  const std::string guess = GuessLogFormat(text);
  std::string message = fmt::format("no {} timing line; expected lines with {}", format, expected);
  if (!guess.empty() && guess != format)
    message += fmt::format(" (this looks like a {} log: pass the framework that wrote it)", guess);
  throw InputError({file}, "log", message);
}

}  // namespace meshplan
