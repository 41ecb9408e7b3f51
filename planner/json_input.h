// JSON input: parsing a user's JSON file (Hugging Face config.json, measured.json, sweep
// records) so that no input can crash or exhaust the process, and locating a field in it.
//
// ParseJson() first walks the text as tokens, without building anything, and refuses with
// an InputError at file:line:column:
//   * arrays / objects nested deeper than kMaxJsonDepth (planner/limits.h), before the
//     document is built, so a 100,000-deep file cannot overflow the stack;
//   * numbers that do not fit a double (1e400, a 400-digit integer): nlohmann would throw
//     out_of_range from inside the parser;
//   * a key given twice in one object (nlohmann would keep the last silently);
//   * a NUL byte (nlohmann stops there, so bytes after one would be ignored).
// It then builds the document; syntax errors, truncation and invalid UTF-8 become an
// InputError at the byte nlohmann stopped at. So a parsed document holds only finite
// numbers and unique keys. An integer beyond int64 (a 40-digit one) is kept as a double
// or uint64; readers take integers through JsonInt64(), which refuses it, so the field's
// own expectation is what the error says.
// Readers name fields "a.b[2].c"; LocateJsonField() finds where such a field is in the
// text, to give a reader's error its line and column.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "planner/input_error.h"

namespace meshplan {

// `file` names the text in errors.
nlohmann::json ParseJson(const std::string& text, const std::string& file);
// ReadInputFile(path, field) (planner/input_file.h), then ParseJson.
nlohmann::json LoadJsonFile(const std::string& path, const std::string& field = "");

// Where the value of `field` ("environment.world_size", "ranks[0].phase_peaks[1].phase",
// "estimate/setup/model") starts in `text`; for a missing field, where its nearest present
// parent starts. Line and column 0 when the text is not JSON at all.
InputLocation LocateJsonField(const std::string& text, const std::string& file,
                              const std::string& field);
// `error` with the line and column of its field in `text`, when it has none yet.
InputError LocatedInJson(const InputError& error, const std::string& text);

// An integer value as int64 (nullopt for a non-integer or one above INT64_MAX).
std::optional<int64_t> JsonInt64(const nlohmann::json& value);

}  // namespace meshplan
