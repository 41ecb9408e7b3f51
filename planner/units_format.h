// Numbers as text: the one spelling of each unit that the CLI tables, the planner's
// messages and the GUI panels share. Inputs are SI (bytes, seconds, fractions). Memory is
// shown in GiB (2^30 bytes) and MiB (2^20), as PyTorch, Megatron-LM and torchtitan report it
// and nvidia-smi counts it; rates keep SI units (GB/s = 1e9 bytes/s, TFLOP/s).
// Pure functions of their arguments; none throws.
#pragma once

#include <cstdint>
#include <string>

namespace meshplan {

// ---- Display-unit numbers, for table cells whose unit sits in the column header.
inline constexpr double kBytesPerGiB = 1024.0 * 1024 * 1024;
inline constexpr double kBytesPerMiB = 1024.0 * 1024;
constexpr double ToGiB(double bytes) { return bytes / kBytesPerGiB; }
constexpr double ToMs(double seconds) { return seconds * 1e3; }
// part / whole in percent; 0 when whole <= 0.
constexpr double PercentOf(double part, double whole) { return whole > 0 ? 100 * part / whole : 0; }

// ---- Text with the unit.
std::string GroupDigits(int64_t value);            // 1234567 -> "1,234,567"
std::string FormatCount(double count);             // "950", "123.4k", "1.23M", "6.74B", "1.20T"
std::string FormatTokensPerS(double tokens_per_s); // FormatCount of a rate: 74600 -> "74.6k"
std::string FormatPercent(double fraction);        // 0.4123 -> "41.2%"
// FLOP/s as a number of TFLOP/s (1e12), the unit left to the caller's header: one decimal
// from 1 TFLOP/s ("412.3"), three significant digits below ("0.0512", a CPU).
std::string FormatTflops(double flops_per_s);

// Bytes in GiB: 2 decimals below 10 GiB, else 1 ("3.37 GiB", "24.9 GiB"); with `decimals`
// fixed, for aligned columns (FormatGiB(2.5 * 2^30, 1) -> "2.5 GiB").
std::string FormatGiB(double bytes);
std::string FormatGiB(double bytes, int decimals);
std::string FormatMiB(double bytes, int decimals);  // (12.5 * 2^20, 2) -> "12.50 MiB"

// Seconds in the unit that fits: "35 us", "8.9 ms", "3.51 s" ("0 s" for 0); with
// `decimals` fixed, in seconds (FormatSeconds(1.2345, 3) -> "1.234 s").
std::string FormatSeconds(double seconds);
std::string FormatSeconds(double seconds, int decimals);
std::string FormatMs(double seconds, int decimals);  // (0.01234, 1) -> "12.3 ms"

}  // namespace meshplan
