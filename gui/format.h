// Short spellings of the explorer's numbers (GB = 1e9 bytes, as in SPEC.md).
// Pure; no ImGui.
#pragma once

#include <string>

namespace meshplan {

std::string FormatGB(double bytes);             // "12.3 GB" (2 decimals below 10 GB)
std::string FormatSeconds(double seconds);      // "812 ms", "1.24 s", "35 us"
std::string FormatCount(double count);          // "950", "123.4k", "1.23M", "6.74B"
std::string FormatTokensPerS(double tokens_s);  // FormatCount of tokens/s
std::string FormatPercent(double fraction);     // 0.4123 -> "41.2%"

}  // namespace meshplan
