#include "cli/flag_checks.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>

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

CLI::Validator FiniteInRange(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value))
          return fmt::format("'{}' is not a number; expected a number from {} to {}", text, min,
                             max);
        if (!std::isfinite(value) || value < min || value > max)
          return fmt::format("{} is out of range; expected a finite number from {} to {}", text,
                             min, max);
        return "";
      },
      fmt::format("[{}, {}]", min, max));
}

}  // namespace meshplan
