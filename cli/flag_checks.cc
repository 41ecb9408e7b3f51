#include "cli/flag_checks.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

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

std::string ParseTokenCount(const std::string& text, int64_t max, int64_t* tokens) {
  static constexpr std::pair<const char*, int64_t> kSuffixes[] = {
      {"Ki", int64_t{1} << 10}, {"Mi", int64_t{1} << 20}, {"Gi", int64_t{1} << 30},
      {"Ti", int64_t{1} << 40}, {"k", 1'000},           {"M", 1'000'000},
      {"G", 1'000'000'000},     {"T", 1'000'000'000'000}};
  const std::string refused = "'" + text + "' is not " + kTokenCountForms;
  // Split off the suffix, then the number's whole and fractional digits.
  std::string number = text;
  int64_t unit = 1;
  for (const auto& [suffix, value] : kSuffixes) {
    const std::string sfx = suffix;
    if (number.size() > sfx.size() &&
        number.compare(number.size() - sfx.size(), sfx.size(), sfx) == 0) {
      number.resize(number.size() - sfx.size());
      unit = value;
      break;
    }
  }
  const size_t dot = number.find('.');
  const std::string whole = number.substr(0, dot);
  const std::string fraction = dot == std::string::npos ? "" : number.substr(dot + 1);
  const auto digits = [](const std::string& d) {
    return d.find_first_not_of("0123456789") == std::string::npos;
  };
  if (whole.empty() || !digits(whole) || !digits(fraction) ||
      (dot != std::string::npos && fraction.empty()) || fraction.size() > 12)
    return refused;
  // value = (whole * 10^f + fraction) * unit / 10^f, in 128 bits so nothing wraps.
  // With at most 12 fractional digits and scaled kept under (max + 1) * 10^12, the product
  // stays far below 2^127.
  const std::string out_of_range =
      fmt::format("{} is out of range; expected from 1 to {} tokens", text, max);
  __int128 scaled = 0, scale = 1;
  for (const char c : whole + fraction) {
    scaled = scaled * 10 + (c - '0');
    if (scaled > (__int128{max} + 1) * 1'000'000'000'000) return out_of_range;
  }
  for (size_t i = 0; i < fraction.size(); ++i) scale *= 10;
  const __int128 product = scaled * unit;
  if (product % scale != 0)
    return fmt::format("{} is not a whole number of tokens; expected {}", text, kTokenCountForms);
  const __int128 value = product / scale;
  if (value < 1 || value > max) return out_of_range;
  *tokens = static_cast<int64_t>(value);
  return "";
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
