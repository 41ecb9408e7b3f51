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
// A finite number in [min, max], in decimal (no nan, no inf, no hex, not empty).
CLI::Validator FiniteInRange(double min, double max);
// A text flag whose empty value would read as "not given" is refused; `what` says what
// the flag takes ("a plan string").
CLI::Validator NonEmptyText(const std::string& what);
// A file the command writes: not empty, and a new path or a regular file to replace
// (CheckOutputPath, planner/output_path.h: never a FIFO, a device or a directory).
CLI::Validator OutputFile();

}  // namespace meshplan
