// Spellings: an enum's one written form per value, as a constexpr table of (value, name)
// pairs, and what every reader and writer of that enum needs from it: the name of a value,
// the value of a name, and the names for an error message ("fused, naive, auto"). Files,
// flags, JSON and tables all spell an enum through its table (planner/names.cc,
// planner/config/framework_yaml.cc, planner/attention_*.h).
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace meshplan {

template <typename Enum, size_t N>
using Spellings = std::array<std::pair<Enum, const char*>, N>;

// The name of `value`; "?" when the table has none (a programming error).
template <typename Enum, size_t N>
constexpr const char* SpellingOf(const Spellings<Enum, N>& table, Enum value) {
  for (const auto& [v, name] : table)
    if (v == value) return name;
  return "?";
}

// The value spelled `text` into *out; false (and *out untouched) for any other text.
template <typename Enum, size_t N>
bool ParseSpelling(const Spellings<Enum, N>& table, std::string_view text, Enum* out) {
  for (const auto& [v, name] : table)
    if (text == name) {
      *out = v;
      return true;
    }
  return false;
}

// Every name, in table order, comma-separated.
template <typename Enum, size_t N>
std::string AllowedSpellings(const Spellings<Enum, N>& table) {
  std::string out;
  for (const auto& [v, name] : table) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

}  // namespace meshplan
