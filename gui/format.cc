#include "gui/format.h"

#include <cmath>
#include <fmt/format.h>

namespace meshplan {

std::string FormatGB(double bytes) {
  const double gb = bytes / 1e9;
  return std::abs(gb) < 10 ? fmt::format("{:.2f} GB", gb) : fmt::format("{:.1f} GB", gb);
}

std::string FormatSeconds(double s) {
  const double a = std::abs(s);
  if (a == 0) return "0 s";
  if (a < 1e-3) return fmt::format("{:.0f} us", s * 1e6);
  if (a < 1) return fmt::format("{:.1f} ms", s * 1e3);
  return fmt::format("{:.2f} s", s);
}

std::string FormatCount(double n) {
  const double a = std::abs(n);
  if (a >= 1e12) return fmt::format("{:.2f}T", n / 1e12);
  if (a >= 1e9) return fmt::format("{:.2f}B", n / 1e9);
  if (a >= 1e6) return fmt::format("{:.2f}M", n / 1e6);
  if (a >= 1e3) return fmt::format("{:.1f}k", n / 1e3);
  return fmt::format("{:.0f}", n);
}

std::string FormatTokensPerS(double t) { return FormatCount(t); }

std::string FormatPercent(double fraction) { return fmt::format("{:.1f}%", fraction * 100); }

}  // namespace meshplan
