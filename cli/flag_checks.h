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
// A finite number in [min, max] (no nan, no inf).
CLI::Validator FiniteInRange(double min, double max);

}  // namespace meshplan
