#include "cli/flag_checks.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>

#include "planner/input_error.h"
#include "planner/output_path.h"

namespace meshplan {

CLI::Validator IntegerInRange(int64_t min, int64_t max, const std::string& why) {
  const std::string range = fmt::format("an integer from {} to {} ({})", min, max, why);
  return CLI::Validator(
      [min, max, range](std::string& text) -> std::string {
        int64_t value = 0;
        const char* begin = text.data() + (!text.empty() && text[0] == '+' ? 1 : 0);
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(begin, end, value);
        if (ec == std::errc::result_out_of_range || (ec == std::errc() && ptr == end &&
                                                     (value < min || value > max)))
          return text + " is out of range; expected " + range;
        if (ec != std::errc() || ptr != end || begin == end)
          return "'" + text + "' is not an integer; expected " + range;
        return "";
      },
      fmt::format("[{}, {}]", min, max));
}

// A uint64_t flag: decimal digits only (no sign), at most 2^64-1.
CLI::Validator Uint64InRange(const std::string& what) {
  const std::string range = fmt::format("an integer from 0 to {} ({})",
                                        std::numeric_limits<uint64_t>::max(), what);
  return CLI::Validator(
      [range](std::string& text) -> std::string {
        uint64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (ec == std::errc::result_out_of_range) return text + " is out of range; expected " + range;
        if (ec != std::errc() || ptr != end || text.empty())
          return "'" + text + "' is not a non-negative integer; expected " + range;
        return "";
      },
      "[0, 2^64-1]");
}

bool ParseDecimal(const std::string& text, double* value) {
  // from_chars reads decimal only: "0x10" and "" are not numbers (strtod's would be).
  const char* begin = text.data() + (!text.empty() && text[0] == '+' ? 1 : 0);
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, *value, std::chars_format::general);
  return ec == std::errc() && ptr == end && begin != end;
}

CLI::Validator FiniteInRange(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        double value = 0;
        if (!ParseDecimal(text, &value))
          return fmt::format("'{}' is not a decimal number; expected a number from {} to {}",
                             text, min, max);
        if (!std::isfinite(value) || value < min || value > max)
          return fmt::format("{} is out of range; expected a finite number from {} to {}", text,
                             min, max);
        return "";
      },
      fmt::format("[{}, {}]", min, max));
}

CLI::Validator NonEmptyText(const std::string& what) {
  return CLI::Validator(
      [what](std::string& text) -> std::string {
        return text.empty() ? "an empty value; expected " + what : "";
      },
      "");
}

CLI::Validator OutputFile() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          CheckOutputPath(text, "");
        } catch (const InputError& e) {
          return e.message();
        }
        return "";
      },
      "FILE");
}

}  // namespace meshplan
