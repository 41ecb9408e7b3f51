// ReadInputFile: the one place the planner reads a user's file (configs, plan files,
// Hugging Face config.json, measured.json, sweep records).
//
// Only regular files are read. A directory, FIFO, socket or device is refused before a
// single byte is read, so a FIFO cannot block and /dev/zero cannot fill memory: the file
// is opened non-blocking, fstat()ed, and read only when it is a regular file of at most
// kMaxInputFileBytes (planner/limits.h). Every failure is an InputError naming the path,
// the field it came from (when given) and what is expected.
#pragma once

#include <string>

#include "planner/input_error.h"

namespace meshplan {

// What a file of this st_mode is, for refusals: "a directory", "a FIFO (named pipe)",
// "a socket", "a character device", "a block device", "not a regular file".
const char* DescribeFileType(unsigned mode);

// The whole file. `field` names where the path came from ("--model", "measured"), or "".
std::string ReadInputFile(const std::string& path, const std::string& field = "");

}  // namespace meshplan
