// WriteFileAtomically: a text file lands whole or not at all (plan files, hardware files,
// measured.json, the snapshots' `latest` pointer).
//
// The text is written to a temporary file beside `path` (<path>.tmp.<pid>), flushed to
// disk (fsync), renamed over `path`, and the folder is synced. On failure the temporary is
// removed, `path` is left as it was, and std::runtime_error says which step failed and why.
#pragma once

#include <string>

namespace meshplan {

void WriteFileAtomically(const std::string& path, const std::string& text);

}  // namespace meshplan
