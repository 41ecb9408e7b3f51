#include "planner/config/yaml_fields.h"

#include <charconv>
#include <cmath>
#include <map>
#include <sstream>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include "planner/checked_math.h"
#include "planner/input_file.h"
#include "planner/limits.h"

namespace meshplan {
namespace {

// "1e15" rather than "1000000000000000" in messages.
std::string FormatLimit(double v) {
  if (v >= 1e6 && v == std::pow(10.0, std::round(std::log10(v))))
    return fmt::format("1e{}", static_cast<int>(std::round(std::log10(v))));
  return fmt::format("{}", v);
}

std::string Expectation(IntRange r) {
  const std::string upper = " (at most " + FormatLimit(static_cast<double>(r.max)) + ")";
  if (r.min == 1) return "a positive integer" + upper;
  if (r.min == 0) return "a non-negative integer" + upper;
  return fmt::format("an integer in [{}, {}]", r.min, FormatLimit(static_cast<double>(r.max)));
}

std::string Expectation(NumberRange r) {
  if (r.min == 0 && r.max > 10) {  // a size or a rate: the upper bound only catches typos
    return std::string(r.min_inclusive ? "a non-negative" : "a positive") + " number (at most " +
           FormatLimit(r.max) + ")";
  }
  return fmt::format("a number in {}{}, {}]", r.min_inclusive ? "[" : "(", r.min, FormatLimit(r.max));
}

bool IsQuoted(const YAML::Node& node) { return node.Tag() == "!"; }

}  // namespace

InputLocation LocationOf(const std::string& file, const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0) return {file, 0, 0};
  return {file, mark.line + 1, mark.column + 1};
}

namespace {

// The byte offset of the first byte of `text` that is not part of valid UTF-8, or npos.
size_t FirstInvalidUtf8(const std::string& text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    size_t length = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (c < 0x80) length = 1;
    else if (c >= 0xC2 && c <= 0xDF) length = 2;
    else if (c == 0xE0) length = 3, lo = 0xA0;
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) length = 3;
    else if (c == 0xED) length = 3, hi = 0x9F;  // no UTF-16 surrogates
    else if (c == 0xF0) length = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) length = 4;
    else if (c == 0xF4) length = 4, hi = 0x8F;
    else return i;
    if (length > 1) {
      if (i + length > n || p[i + 1] < lo || p[i + 1] > hi) return i;
      for (size_t k = 2; k < length; ++k)
        if (p[i + k] < 0x80 || p[i + k] > 0xBF) return i;
    }
    i += length;
  }
  return std::string::npos;
}

InputLocation LocationOfOffset(const std::string& file, const std::string& text, size_t offset) {
  InputLocation where{file, 1, 1};
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++where.line;
      where.column = 1;
    } else {
      ++where.column;
    }
  }
  return where;
}

// A pass over the parser's events before any node is built: refuses nesting deeper than
// kMaxYamlDepth (at the collection that goes too deep) and documents that expand to more
// than kMaxYamlNodes nodes, each alias counting the nodes of its anchor (alias bombs), and
// aliases to a collection that contains them (cycles).
class YamlShapeCheck : public YAML::EventHandler {
 public:
  explicit YamlShapeCheck(const std::string& file) : file_(file) {}

  // yaml-cpp's Load reads the first document only: a second one would be ignored.
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (documents_++ > 0)
      throw InputError(LocationOf(file_, mark), "",
                       "a second YAML document (after '---' or '...'); expected one document "
                       "per file");
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { Leaf(mark, anchor, 1); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const auto it = sizes_.find(anchor);
    if (it == sizes_.end())
      throw InputError(LocationOf(file_, mark), "",
                       "an alias to a collection that contains it (a cycle); expected aliases "
                       "only to complete nodes");
    Leaf(mark, YAML::NullAnchor, it->second);
  }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                const std::string&) override {
    Leaf(mark, anchor, 1);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Open_ {
    YAML::anchor_t anchor = YAML::NullAnchor;
    int64_t nodes = 1;
  };
  void Count(const YAML::Mark& mark, int64_t nodes) {
    total_ += nodes;  // each term is at most kMaxYamlNodes: no overflow
    if (total_ > kMaxYamlNodes)
      throw InputError(LocationOf(file_, mark), "",
                       fmt::format("the document expands to more than {} nodes (each alias "
                                   "counts the nodes it repeats); expected at most {} "
                                   "(kMaxYamlNodes, docs/limits.md)",
                                   kMaxYamlNodes, kMaxYamlNodes));
  }
  void Leaf(const YAML::Mark& mark, YAML::anchor_t anchor, int64_t nodes) {
    Count(mark, nodes);
    if (!open_.empty()) open_.back().nodes += nodes;
    if (anchor != YAML::NullAnchor) sizes_[anchor] = nodes;
  }
  void Open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (static_cast<int>(open_.size()) >= kMaxYamlDepth)
      throw InputError(LocationOf(file_, mark), "",
                       fmt::format("sequences and mappings nested deeper than {} levels; "
                                   "expected at most {} (kMaxYamlDepth, docs/limits.md)",
                                   kMaxYamlDepth, kMaxYamlDepth));
    Count(mark, 1);
    open_.push_back({anchor, 1});
  }
  void Close() {
    if (open_.empty()) return;
    const Open_ done = open_.back();
    open_.pop_back();
    if (!open_.empty()) open_.back().nodes += done.nodes;
    if (done.anchor != YAML::NullAnchor) sizes_[done.anchor] = done.nodes;
  }

  const std::string& file_;
  std::vector<Open_> open_;
  std::map<YAML::anchor_t, int64_t> sizes_;  // expanded nodes per complete anchor
  int64_t total_ = 0;
  int documents_ = 0;
};

}  // namespace

YAML::Node LoadYamlText(const std::string& text, const std::string& file) {
  if (const size_t nul = text.find('\0'); nul != std::string::npos)  // yaml-cpp stops there
    throw InputError(LocationOfOffset(file, text, nul), "",
                     "a NUL byte; expected a UTF-8 text file with nothing hidden after a NUL");
  if (const size_t bad = FirstInvalidUtf8(text); bad != std::string::npos)
    throw InputError(LocationOfOffset(file, text, bad), "",
                     fmt::format("byte 0x{:02X} is not valid UTF-8; expected a UTF-8 text file",
                                 static_cast<unsigned>(static_cast<unsigned char>(text[bad]))));
  try {
    {  // the events first: nothing is built from a document that is too deep or too large
      std::istringstream in(text);
      YAML::Parser parser(in);
      YamlShapeCheck check(file);
      parser.HandleNextDocument(check);
      parser.HandleNextDocument(check);  // a second document: refused by OnDocumentStart
    }
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw InputError(LocationOf(file, e.mark), "", "malformed YAML: " + e.msg);
  } catch (const YAML::Exception& e) {
    throw InputError(LocationOf(file, e.mark), "", std::string("cannot read YAML: ") + e.what());
  }
}

YAML::Node LoadYamlFile(const std::filesystem::path& path) {
  return LoadYamlText(ReadInputFile(path.string()), path.string());
}

std::string DescribeNode(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "an empty value";
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a list";
  if (IsQuoted(node)) return "the string \"" + node.Scalar() + "\"";
  return "'" + node.Scalar() + "'";
}

YamlFields::YamlFields(const YAML::Node& node, std::string file, std::string field)
    : node_(node), file_(std::move(file)), field_(std::move(field)) {
  if (!node_.IsMap())
    throw InputError(Where(), field_.empty() ? "<document>" : field_,
                     "expected a mapping of keys to values, got " + DescribeNode(node_));
}

std::string YamlFields::Field(const std::string& key) const {
  return field_.empty() ? key : field_ + "." + key;
}

void YamlFields::Fail(const std::string& key, const std::string& message) const {
  throw InputError(Where(key), Field(key), message);
}

void YamlFields::AllowOnly(std::span<const std::string_view> allowed) const {
  std::map<std::string, YAML::Mark> seen;
  for (const auto& item : node_) {
    const YAML::Node& key = item.first;
    const std::string name = key.IsScalar() ? key.Scalar() : "";
    bool ok = false;
    for (std::string_view a : allowed) ok = ok || name == a;
    if (!ok) {
      std::string list;
      for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      throw InputError(LocationOf(file_, key.Mark()), Field(name.empty() ? "<key>" : name),
                       "unknown key; allowed keys: " + list);
    }
    auto [it, inserted] = seen.emplace(name, key.Mark());
    if (!inserted)
      throw InputError(LocationOf(file_, key.Mark()), Field(name),
                       fmt::format("key given twice (first on line {})", it->second.line + 1));
  }
}

bool YamlFields::Has(const std::string& key) const { return node_[key].IsDefined(); }

YAML::Node YamlFields::Get(const std::string& key) const { return node_[key]; }

InputLocation YamlFields::Where(const std::string& key) const {
  const YAML::Node value = node_[key];
  return value.IsDefined() ? LocationOf(file_, value.Mark()) : Where();
}

YAML::Node YamlFields::Required(const std::string& key, const std::string& expectation) const {
  const YAML::Node value = node_[key];
  if (!value.IsDefined())
    throw InputError(Where(), Field(key), "missing required field; expected " + expectation);
  return value;
}

YAML::Node YamlFields::Scalar(const std::string& key, const std::string& expectation) const {
  YAML::Node value = Required(key, expectation);
  if (!value.IsScalar()) Fail(key, "expected " + expectation + ", got " + DescribeNode(value));
  return value;
}

template <typename T>
T YamlFields::Parsed(const std::string& key, const std::string& expected,
                     const char* beyond_range) const {
  const YAML::Node value = Scalar(key, expected);
  const std::string& text = value.Scalar();
  if (IsQuoted(value)) Fail(key, "expected " + expected + ", got " + DescribeNode(value));
  const char* begin = text.data() + (!text.empty() && text[0] == '+' ? 1 : 0);
  const char* end = text.data() + text.size();
  T out{};
  const auto [ptr, ec] = std::from_chars(begin, end, out);
  if (ec == std::errc::result_out_of_range)
    Fail(key, "value " + text + " " + beyond_range + "; expected " + expected);
  bool finite = true;
  if constexpr (std::is_floating_point_v<T>) finite = std::isfinite(out);
  if (ec != std::errc() || ptr != end || begin == end || !finite)
    Fail(key, "expected " + expected + ", got " + DescribeNode(value));
  return out;
}

int64_t YamlFields::Int(const std::string& key, IntRange range) const {
  const std::string expected = Expectation(range);
  const auto out = Parsed<int64_t>(key, expected, "overflows a 64-bit integer");
  if (out < range.min || out > range.max)
    Fail(key, "value " + Get(key).Scalar() + " is out of range; expected " + expected);
  return out;
}

int64_t YamlFields::Int(const std::string& key, IntRange range, int64_t fallback) const {
  return Has(key) ? Int(key, range) : fallback;
}

double YamlFields::Number(const std::string& key, NumberRange range) const {
  const std::string expected = Expectation(range);
  const double out = Parsed<double>(key, expected, "is out of range");
  const bool above_min = range.min_inclusive ? out >= range.min : out > range.min;
  if (!above_min || out > range.max)
    Fail(key, "value " + Get(key).Scalar() + " is out of range; expected " + expected);
  return out;
}

double YamlFields::Number(const std::string& key, NumberRange range, double fallback) const {
  return Has(key) ? Number(key, range) : fallback;
}

double YamlFields::ScaledNumber(const std::string& key, NumberRange range, int exponent) const {
  Number(key, range);  // validates type and range in the YAML unit
  return ParseShifted(Get(key).Scalar(), exponent);
}

double YamlFields::ScaledNumber(const std::string& key, NumberRange range, int exponent,
                                double fallback_si) const {
  return Has(key) ? ScaledNumber(key, range, exponent) : fallback_si;
}

double ParseShifted(const std::string& number_text, int exponent) {
  std::string text = number_text;
  if (!text.empty() && text[0] == '+') text.erase(0, 1);
  const size_t e = text.find_first_of("eE");
  int64_t exp10 = 0;
  if (e != std::string::npos) {
    const auto [ptr, ec] = std::from_chars(
        text.data() + e + 1 + (text[e + 1] == '+' ? 1 : 0), text.data() + text.size(), exp10);
    // An exponent beyond int64 in a number that Number() accepted as finite and in range
    // can only belong to a zero ("0e99999999999999999999").
    if (ec != std::errc()) return 0;
    text.resize(e);
  }
  const std::optional<int64_t> shifted = CheckedAdd(exp10, exponent);
  if (!shifted) return 0;  // the same zero, its exponent at the edge of int64
  text += "e" + std::to_string(*shifted);
  double out = 0;
  std::from_chars(text.data(), text.data() + text.size(), out);
  return out;
}

std::string YamlQuoted(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string FormatShifted(double value, int exponent) {
  if (value == 0) return "0";
  // Shortest round-trip digits of `value`: "d.ddde+XX".
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  const std::string sci(buf, end);
  const size_t e = sci.find('e');
  const bool negative = sci[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  const int exp10 = std::stoi(sci.substr(e + 1)) - exponent;  // of the first digit
  std::string out = negative ? "-" : "";
  if (exp10 >= 0 && exp10 < 16) {  // plain: 81559, 989.4
    const size_t int_digits = static_cast<size_t>(exp10) + 1;
    if (digits.size() <= int_digits) return out + digits + std::string(int_digits - digits.size(), '0');
    return out + digits.substr(0, int_digits) + "." + digits.substr(int_digits);
  }
  if (exp10 < 0 && exp10 >= -5) return out + "0." + std::string(-exp10 - 1, '0') + digits;  // 0.0003
  // Scientific with a '.', so YAML 1.1 readers (PyYAML) also see a number: 1.0e-20.
  return out + digits.substr(0, 1) + "." + (digits.size() > 1 ? digits.substr(1) : "0") + "e" +
         std::to_string(exp10);
}

std::string YamlFields::String(const std::string& key) const {
  const YAML::Node value = Scalar(key, "a non-empty string");
  if (value.Scalar().empty()) Fail(key, "expected a non-empty string, got \"\"");
  return value.Scalar();
}

std::string YamlFields::String(const std::string& key, const std::string& fallback) const {
  return Has(key) ? String(key) : fallback;
}

bool YamlFields::Bool(const std::string& key) const {
  const YAML::Node value = Scalar(key, "true or false");
  bool out = false;
  if (IsQuoted(value) || !YAML::convert<bool>::decode(value, out))
    Fail(key, "expected true or false, got " + DescribeNode(value));
  return out;
}

bool YamlFields::Bool(const std::string& key, bool fallback) const {
  return Has(key) ? Bool(key) : fallback;
}

std::vector<std::string> YamlFields::StringList(const std::string& key) const {
  std::vector<std::string> out;
  if (!Has(key)) return out;
  const YAML::Node value = node_[key];
  if (!value.IsSequence())
    Fail(key, "expected a list of strings like [a, b], got " + DescribeNode(value));
  for (const auto& item : value) {
    if (!item.IsScalar() || item.Scalar().empty())
      throw InputError(LocationOf(file_, item.Mark()), Field(key),
                       "expected a list of non-empty strings, got an item that is " +
                           DescribeNode(item));
    out.push_back(item.Scalar());
  }
  return out;
}

YamlFields YamlFields::Map(const std::string& key) const {
  return YamlFields(Required(key, "a mapping"), file_, Field(key));
}

}  // namespace meshplan
