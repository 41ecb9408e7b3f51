#include "planner/units_format.h"

#include <fmt/format.h>

#include <cmath>

namespace meshplan {

std::string GroupDigits(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string FormatCount(double n) {
  const double a = std::abs(n);
  if (a >= 1e12) return fmt::format("{:.2f}T", n / 1e12);
  if (a >= 1e9) return fmt::format("{:.2f}B", n / 1e9);
  if (a >= 1e6) return fmt::format("{:.2f}M", n / 1e6);
  if (a >= 1e3) return fmt::format("{:.1f}k", n / 1e3);
  return fmt::format("{:.0f}", n);
}

std::string FormatTokensPerS(double tokens_per_s) { return FormatCount(tokens_per_s); }

std::string FormatPercent(double fraction) { return fmt::format("{:.1f}%", fraction * 100); }

std::string FormatTflops(double flops_per_s) {
  const double tflops = flops_per_s / 1e12;
  return std::abs(tflops) >= 1 ? fmt::format("{:.1f}", tflops) : fmt::format("{:.3g}", tflops);
}

std::string FormatGiB(double bytes) { return FormatGiB(bytes, std::abs(ToGiB(bytes)) < 10 ? 2 : 1); }

std::string FormatGiB(double bytes, int decimals) {
  return fmt::format("{:.{}f} GiB", ToGiB(bytes), decimals);
}

std::string FormatMiB(double bytes, int decimals) {
  return fmt::format("{:.{}f} MiB", bytes / kBytesPerMiB, decimals);
}

std::string FormatSeconds(double s) {
  const double a = std::abs(s);
  if (a == 0) return "0 s";
  if (a < 1e-3) return fmt::format("{:.0f} us", s * 1e6);
  if (a < 1) return FormatMs(s, 1);
  return FormatSeconds(s, 2);
}

std::string FormatSeconds(double s, int decimals) { return fmt::format("{:.{}f} s", s, decimals); }

std::string FormatMs(double s, int decimals) {
  return fmt::format("{:.{}f} ms", ToMs(s), decimals);
}

}  // namespace meshplan
