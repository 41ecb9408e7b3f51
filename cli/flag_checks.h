// Checks of numeric flags, shared by meshplan and meshplan-exec: each reads the flag's text
// itself, so a value CLI11 would clamp, wrap or round is refused (exit 2) with the range.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace meshplan {

// An integer in [min, max] (decimal, optional '+'); `why` names the unit or the bound.
CLI::Validator IntegerInRange(int64_t min, int64_t max, const std::string& why);
// A uint64_t: decimal digits only (no sign), at most 2^64-1; `why` names what it is.
CLI::Validator Uint64InRange(const std::string& why);
// `text` as a decimal number (what std::from_chars reads: no hex, no leading space, not
// empty; "nan" and "inf" are numbers here, which callers refuse by range); false when it is
// not one or is past a double's range.
bool ParseDecimal(const std::string& text, double* value);
// A count of tokens as people write it: digits with an optional fraction and an optional
// suffix, decimal k M G T (10^3 .. 10^12) or binary Ki Mi Gi Ti (2^10 .. 2^40): "4194304",
// "4M" (4,000,000), "16Mi" (16,777,216), "1.5Mi". Exact: the value must be a whole number
// of tokens from 1 to `max` ("0.1Ki" is refused). On success *tokens holds it and the
// result is empty; otherwise the reason, naming the allowed forms.
std::string ParseTokenCount(const std::string& text, int64_t max, int64_t* tokens);
// The forms ParseTokenCount reads, for messages and --help.
inline constexpr const char* kTokenCountForms =
    "a whole number of tokens, e.g. 4194304, 4M (10^6), 16Mi (2^20); suffixes k M G T (powers "
    "of 10) or Ki Mi Gi Ti (powers of 2)";
// A finite number in [min, max], in decimal (no nan, no inf, no hex, not empty).
CLI::Validator FiniteInRange(double min, double max);
// A text flag whose empty value would read as "not given" is refused; `what` says what
// the flag takes ("a plan string").
CLI::Validator NonEmptyText(const std::string& what);
// A file the command writes: not empty, and a new path or a regular file to replace
// (CheckOutputPath, planner/output_path.h: never a FIFO, a device or a directory).
CLI::Validator OutputFile();

}  // namespace meshplan
