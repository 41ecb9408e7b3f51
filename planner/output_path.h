// CheckOutputPath / CheckDistinctOutputs: which paths meshplan may write a file to, checked
// before any work and again by AtomicFileWriter (planner/atomic_file.h) when it opens.
//
// A file is only ever written as a whole new regular file renamed over `path`, so `path`
// must be a new name or an existing regular file (or a symlink to one, which the file then
// replaces). Refused with an InputError naming `flag` (or the path, when `flag` is ""),
// exit code 2: an empty path; a directory, FIFO, socket or device, or a symlink to one (a
// rename would replace a device node or hide a FIFO's reader, and a write to a FIFO would
// block). CheckDistinctOutputs refuses two flags that name one file, which would overwrite
// each other.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace meshplan {

void CheckOutputPath(const std::string& path, const std::string& flag);

// (flag, path) pairs; empty paths (flags not given) are skipped.
void CheckDistinctOutputs(const std::vector<std::pair<std::string, std::string>>& outputs);

}  // namespace meshplan
