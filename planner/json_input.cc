#include "planner/json_input.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "planner/input_file.h"
#include "planner/limits.h"

namespace meshplan {
namespace {

using nlohmann::json;

// ---- The token walk ----
// A pass over JSON text that tracks where each value starts (line, column, and its path
// of keys and indices) without building a document. It stops quietly at the first
// character that cannot start or continue a token: the DOM parser reports syntax errors.

struct TextPosition {
  int line = 1;
  int column = 1;
};

// One open array or object.
struct Frame {
  bool object = false;
  bool expect_key = false;  // objects: the next string is a key
  std::string key;          // objects: the key of the current member
  int64_t index = 0;        // arrays: the index of the current element
  std::set<std::string> keys;  // objects: the keys seen (duplicate check)
};

// A visitor gets, for each value, its path (the open frames) and position:
//   void Value(const std::vector<Frame>& frames, TextPosition at, char first);
//   void Open(const std::vector<Frame>& frames, TextPosition at);   // before the push
//   void Key(std::vector<Frame>& frames, const std::string& key, TextPosition at);  // in back()
//   void Number(const std::vector<Frame>& frames, std::string_view token, TextPosition at);
//   bool Done() const;  // stop early
template <typename Visitor>
void WalkJson(const std::string& text, Visitor& visitor) {
  std::vector<Frame> frames;
  TextPosition pos;
  size_t i = 0;
  const size_t n = text.size();
  auto advance = [&](size_t count) {
    for (size_t k = 0; k < count && i < n; ++k, ++i) {
      if (text[i] == '\n') {
        ++pos.line;
        pos.column = 1;
      } else {
        ++pos.column;
      }
    }
  };
  // The string token starting at text[i] == '"', raw (without the quotes); nullopt when
  // it is not terminated.
  auto read_string = [&]() -> std::optional<std::string_view> {
    size_t j = i + 1;
    while (j < n && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
    if (j >= n) return std::nullopt;
    const std::string_view raw(text.data() + i + 1, j - i - 1);
    advance(j + 1 - i);
    return raw;
  };
  while (i < n && !visitor.Done()) {
    const char c = text[i];
    const TextPosition at = pos;
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      advance(1);
    } else if (c == '{' || c == '[') {
      visitor.Value(frames, at, c);
      visitor.Open(frames, at);
      Frame frame;
      frame.object = c == '{';
      frame.expect_key = frame.object;
      frames.push_back(std::move(frame));
      advance(1);
    } else if (c == '}' || c == ']') {
      if (frames.empty()) return;
      frames.pop_back();
      advance(1);
    } else if (c == ',') {
      if (frames.empty()) return;
      if (frames.back().object) frames.back().expect_key = true;
      else ++frames.back().index;
      advance(1);
    } else if (c == ':') {
      advance(1);
    } else if (c == '"') {
      const bool is_key = !frames.empty() && frames.back().object && frames.back().expect_key;
      if (!is_key) visitor.Value(frames, at, c);
      const std::optional<std::string_view> raw = read_string();
      if (!raw) return;
      if (is_key) {
        std::string key(*raw);
        if (key.find('\\') != std::string::npos) {  // decode escapes: "\u0061" is "a"
          try {
            key = json::parse("\"" + key + "\"").get<std::string>();
          } catch (const json::exception&) {
            return;  // a malformed escape: the DOM parser reports it
          }
        }
        frames.back().expect_key = false;
        frames.back().key = key;
        visitor.Key(frames, key, at);
      }
    } else if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      visitor.Value(frames, at, c);
      size_t j = i;
      while (j < n && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '-' ||
                       text[j] == '+' || text[j] == '.' || text[j] == 'e' || text[j] == 'E'))
        ++j;
      visitor.Number(frames, std::string_view(text.data() + i, j - i), at);
      advance(j - i);
    } else if (std::isalpha(static_cast<unsigned char>(c))) {  // true, false, null
      visitor.Value(frames, at, c);
      size_t j = i;
      while (j < n && std::isalpha(static_cast<unsigned char>(text[j]))) ++j;
      advance(j - i);
    } else {
      return;
    }
  }
}

// "ranks[0].phase_peaks" for the open frames (the path of the value about to start).
std::string PathOf(const std::vector<Frame>& frames) {
  std::string out;
  for (const Frame& f : frames) {
    if (f.object) out += (out.empty() ? "" : ".") + f.key;
    else out += "[" + std::to_string(f.index) + "]";
  }
  return out;
}

// A path for a message: at most 40 characters ("[0][0][0]...[0]").
std::string ClipPath(const std::string& path) {
  if (path.size() <= 40) return path;
  return path.substr(0, 20) + "..." + path.substr(path.size() - 10);
}

// A token for a message: at most 40 characters.
std::string Clip(std::string_view token) {
  if (token.size() <= 40) return std::string(token);
  return std::string(token.substr(0, 20)) + "..." + std::string(token.substr(token.size() - 10)) +
         fmt::format(" ({} digits)", token.size());
}

// The checks ParseJson makes before building the document.
class SafetyCheck {
 public:
  explicit SafetyCheck(const std::string& file) : file_(file) {}
  void Value(const std::vector<Frame>&, TextPosition, char) {}
  void Open(const std::vector<Frame>& frames, TextPosition at) {
    if (static_cast<int>(frames.size()) >= kMaxJsonDepth)
      throw InputError(Where(at), ClipPath(PathOf(frames)),
                       fmt::format("arrays and objects nested deeper than {} levels; expected at "
                                   "most {} (kMaxJsonDepth, docs/limits.md)",
                                   kMaxJsonDepth, kMaxJsonDepth));
  }
  void Key(std::vector<Frame>& frames, const std::string& key, TextPosition at) {
    if (!frames.back().keys.insert(key).second)
      throw InputError(Where(at), PathOf(frames),
                       "key given twice in one object; expected each key once");
  }
  // Integers beyond int64 that are finite as doubles pass: nlohmann keeps them as uint64 or
  // double, and each reader refuses them with its own expectation (JsonInt64).
  void Number(const std::vector<Frame>& frames, std::string_view token, TextPosition at) {
    const std::string copy(token);
    char* end = nullptr;
    const double value = std::strtod(copy.c_str(), &end);
    if (end != copy.c_str() && std::isinf(value))
      throw InputError(Where(at), PathOf(frames),
                       "number " + Clip(token) +
                           " is out of range; expected a finite number (at most 1.8e308 in "
                           "magnitude)");
  }
  bool Done() const { return false; }

 private:
  InputLocation Where(TextPosition at) const { return {file_, at.line, at.column}; }
  const std::string& file_;
};

// One step of a field path: a key or an index.
struct PathStep {
  bool is_key = true;
  std::string key;
  int64_t index = 0;
};

// "a.b[2].c" or "a/b/c" -> steps.
std::vector<PathStep> ParseFieldPath(const std::string& field) {
  std::vector<PathStep> steps;
  size_t i = 0;
  while (i < field.size()) {
    const char c = field[i];
    if (c == '.' || c == '/') {
      ++i;
    } else if (c == '[') {
      const size_t close = field.find(']', i);
      if (close == std::string::npos) break;
      PathStep step;
      step.is_key = false;
      std::from_chars(field.data() + i + 1, field.data() + close, step.index);
      steps.push_back(step);
      i = close + 1;
    } else {
      const size_t end = field.find_first_of("./[", i);
      PathStep step;
      step.key = field.substr(i, end == std::string::npos ? std::string::npos : end - i);
      steps.push_back(step);
      i = end == std::string::npos ? field.size() : end;
    }
  }
  return steps;
}

// Finds the value at a path, or its deepest present ancestor.
class Locator {
 public:
  explicit Locator(std::vector<PathStep> target) : target_(std::move(target)) {}
  void Value(const std::vector<Frame>& frames, TextPosition at, char) {
    if (frames.size() > target_.size()) return;
    for (size_t k = 0; k < frames.size(); ++k) {
      const Frame& f = frames[k];
      const PathStep& s = target_[k];
      if (f.object != s.is_key) return;
      if (f.object ? f.key != s.key : f.index != s.index) return;
    }
    if (!found_ || static_cast<int>(frames.size()) > depth_) {
      found_ = true;
      depth_ = static_cast<int>(frames.size());
      at_ = at;
    }
  }
  void Open(const std::vector<Frame>&, TextPosition) {}
  void Key(std::vector<Frame>&, const std::string&, TextPosition) {}
  void Number(const std::vector<Frame>&, std::string_view, TextPosition) {}
  bool Done() const { return found_ && depth_ == static_cast<int>(target_.size()); }

  bool found() const { return found_; }
  TextPosition at() const { return at_; }

 private:
  std::vector<PathStep> target_;
  bool found_ = false;
  int depth_ = -1;
  TextPosition at_;
};

// 1-based line and column of byte offset `byte` (nlohmann counts 1-based: the byte it stopped
// at is text[byte - 1]).
InputLocation LocationOfByte(const std::string& file, const std::string& text, size_t byte) {
  InputLocation where{file, 1, 1};
  const size_t end = std::min(byte > 0 ? byte - 1 : 0, text.size());
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++where.line;
      where.column = 1;
    } else {
      ++where.column;
    }
  }
  return where;
}

// nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 3: syntax
// error while parsing value - invalid literal; last read: 'tr'" without the prefix up to
// the location, which the InputError already carries.
std::string ParseErrorText(const json::parse_error& e) {
  std::string text = e.what();
  const size_t colon = text.find(": ", text.find("parse error"));
  if (colon != std::string::npos) text = text.substr(colon + 2);
  return text;
}

}  // namespace

json ParseJson(const std::string& text, const std::string& file) {
  // nlohmann stops at a NUL byte as if the text ended there: what follows would be ignored.
  if (const size_t nul = text.find('\0'); nul != std::string::npos)
    throw InputError(LocationOfByte(file, text, nul + 1), "",
                     "a NUL byte; expected a UTF-8 JSON text with nothing after its value");
  SafetyCheck check(file);
  WalkJson(text, check);
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    throw InputError(LocationOfByte(file, text, e.byte), "",
                     "malformed JSON: " + ParseErrorText(e) +
                         " (expected UTF-8 JSON: objects, arrays, strings, numbers, true, false, "
                         "null)");
  } catch (const json::exception& e) {  // out_of_range: the walk above refuses these first
    throw InputError({file}, "", std::string("malformed JSON: ") + e.what());
  }
}

json LoadJsonFile(const std::string& path, const std::string& field) {
  return ParseJson(ReadInputFile(path, field), path);
}

InputLocation LocateJsonField(const std::string& text, const std::string& file,
                              const std::string& field) {
  Locator locator(ParseFieldPath(field));
  WalkJson(text, locator);
  if (!locator.found()) return {file, 0, 0};
  return {file, locator.at().line, locator.at().column};
}

InputError LocatedInJson(const InputError& error, const std::string& text) {
  if (error.where().line > 0 || error.where().file.empty()) return error;
  return InputError(LocateJsonField(text, error.where().file, error.field()), error.field(),
                    error.message());
}

std::optional<int64_t> JsonInt64(const json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(v);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

}  // namespace meshplan
