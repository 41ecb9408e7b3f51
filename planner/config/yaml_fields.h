// Typed, located reads of one YAML mapping, for the config loaders (planner/config/config_loader.h).
//
// YamlFields wraps a mapping node with the file it came from and a field prefix
// ("cluster.gpu."). Every read checks presence, type and range and throws
// InputError with "<file>:<line>:<column>: <prefix><key>: <expectation>"; yaml-cpp's
// 0-based marks are reported 1-based. Missing keys are reported at the mapping's
// position. Integers are parsed exactly (no silent overflow, no rounding of 1.5),
// quoted scalars ("4096") are strings, not numbers. Not thread-safe to share while
// the underlying YAML::Node is modified; the loaders only read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "planner/input_error.h"
#include "planner/spellings.h"

namespace meshplan {

// Anything above this in a config is a typo, not a size (1e15 bytes = 1 PB, 1e15 tokens).
inline constexpr int64_t kMaxConfigInt = 1'000'000'000'000'000;

// Inclusive integer range accepted by YamlFields::Int.
struct IntRange {
  int64_t min = 1;
  int64_t max = kMaxConfigInt;
};
// Number range accepted by YamlFields::Number: min < x (or min <= x when min_inclusive), x <= max.
struct NumberRange {
  double min = 0;
  bool min_inclusive = false;
  double max = 1e15;
};

// The location of a yaml-cpp mark (0-based) as an InputLocation (1-based).
InputLocation LocationOf(const std::string& file, const YAML::Mark& mark);

// Parses YAML text of one document; `file` names it in errors. Before yaml-cpp builds
// a tree the text is checked (docs/limits.md): UTF-8 only and no NUL byte, one document
// (yaml-cpp would ignore a second, even a malformed one), nesting at most kMaxYamlDepth,
// at most kMaxYamlNodes nodes with each alias counting the nodes of its anchor (alias
// bombs), no alias to a collection that contains it. Every refusal and malformed YAML is an
// InputError at file:line:column.
YAML::Node LoadYamlText(const std::string& text, const std::string& file);
// ReadInputFile (planner/input_file.h: regular files only), then LoadYamlText.
YAML::Node LoadYamlFile(const std::filesystem::path& path);

class YamlFields {
 public:
  // `node` must be a mapping; otherwise throws "<what> expected a mapping". `field`
  // names the mapping itself ("" for the document root, "cluster.gpu", ...).
  YamlFields(const YAML::Node& node, std::string file, std::string field);

  // Throws on a key outside `allowed` (listing them) and on a key given twice.
  void AllowOnly(std::initializer_list<std::string_view> allowed) const {
    AllowOnly(std::span<const std::string_view>(allowed.begin(), allowed.size()));
  }
  void AllowOnly(std::span<const std::string_view> allowed) const;

  bool Has(const std::string& key) const;
  YAML::Node Get(const std::string& key) const;  // invalid node when missing

  // Required reads throw "missing required field" (naming the expectation) when absent.
  int64_t Int(const std::string& key, IntRange range = {}) const;
  int64_t Int(const std::string& key, IntRange range, int64_t fallback) const;
  double Number(const std::string& key, NumberRange range) const;
  double Number(const std::string& key, NumberRange range, double fallback) const;
  // A number in a unit of 10^exponent SI units ("989.4" in TFLOP/s, exponent 12), range-checked
  // in that unit and converted by shifting the decimal exponent of its text ("989.4e12"):
  // the result is the double nearest the exact decimal value, with no rounding in between.
  double ScaledNumber(const std::string& key, NumberRange range, int exponent) const;
  double ScaledNumber(const std::string& key, NumberRange range, int exponent,
                      double fallback_si) const;
  std::string String(const std::string& key) const;
  std::string String(const std::string& key, const std::string& fallback) const;
  bool Bool(const std::string& key) const;
  bool Bool(const std::string& key, bool fallback) const;
  std::vector<std::string> StringList(const std::string& key) const;  // [] when missing
  YamlFields Map(const std::string& key) const;                      // required mapping

  // "prefix.key" as used in error messages.
  std::string Field(const std::string& key) const;
  // Where the key's value is (or this mapping, when the key is missing).
  InputLocation Where(const std::string& key) const;
  InputLocation Where() const { return LocationOf(file_, node_.Mark()); }
  const std::string& file() const { return file_; }
  const YAML::Node& node() const { return node_; }

  [[noreturn]] void Fail(const std::string& key, const std::string& message) const;

 private:
  YAML::Node Required(const std::string& key, const std::string& expectation) const;
  YAML::Node Scalar(const std::string& key, const std::string& expectation) const;
  // The unquoted scalar at `key` read whole as a T (an optional leading '+'; a double must be
  // finite), else Fail: "value TEXT <beyond_range>" when it is beyond T's range.
  template <typename T>
  T Parsed(const std::string& key, const std::string& expected, const char* beyond_range) const;

  YAML::Node node_;
  std::string file_;
  std::string field_;
};

// A required key whose value is one of `table`'s spellings (planner/spellings.h); anything
// else fails at the key with "expected one of: <spellings>; got '<text>'".
template <typename Enum, size_t N>
Enum ReadChoice(const YamlFields& f, const std::string& key, const Spellings<Enum, N>& table) {
  const std::string text = f.String(key);
  Enum value{};
  if (!ParseSpelling(table, text, &value))
    f.Fail(key, "expected one of: " + AllowedSpellings(table) + "; got '" + text + "'");
  return value;
}
// The same for an optional key: `fallback` when it is absent.
template <typename Enum, size_t N>
Enum ReadChoice(const YamlFields& f, const std::string& key, const Spellings<Enum, N>& table,
                Enum fallback) {
  return f.Has(key) ? ReadChoice(f, key, table) : fallback;
}

// What a YAML node is, for "expected X, got <kind>" messages ("a mapping", "'abc'").
std::string DescribeNode(const YAML::Node& node);

// Decimal exponent shifts between text and doubles, exact in both directions:
// ParseShifted("0.45", 12) is the double nearest 0.45e12; FormatShifted(x, 12) is the
// shortest decimal d with ParseShifted(d, 12) == x ("450" for x = 450e12), in plain
// notation where that is short ("0.0003", "81559") and as "1.5e-20" otherwise.
double ParseShifted(const std::string& number_text, int exponent);
std::string FormatShifted(double value, int exponent);

// `text` as a YAML double-quoted scalar, for the writers (JSON string syntax is a subset of
// YAML's); invalid UTF-8 becomes U+FFFD.
std::string YamlQuoted(const std::string& text);

}  // namespace meshplan
