// WriteFileAtomically / AtomicFileWriter: a text file lands whole or not at all (plan files,
// hardware files, measured.json, the snapshots' `latest` pointer, search dumps).
//
// The text is written to a temporary file beside `path` (<path>.tmp.<pid>), flushed to
// disk (fsync), renamed over `path`, and the folder is synced. Only a new path or a regular
// file is written (CheckOutputPath, planner/output_path.h: never a FIFO, a device or a
// directory). On failure (a full disk, a missing folder, no permission) the temporary is
// removed, `path` is left as it was, and an InputError at `path` (a std::runtime_error;
// exit code 2) says which step failed and why.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace meshplan {

void WriteFileAtomically(const std::string& path, const std::string& text);

// The same, streamed: Write() appends to the temporary as the text is produced, Commit()
// syncs and renames it over `path`. Destroyed without Commit() (an error on the way), it
// removes the temporary and leaves `path` as it was. Not thread-safe: one writer at a time.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path);  // opens the temporary, or throws
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void Write(std::string_view text);  // throws InputError on a short write
  void Commit();                      // flush, fsync, close, rename; throws on failure
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void Fail(const std::string& step);
  std::string path_;
  std::string tmp_;
  std::FILE* file_ = nullptr;
};

}  // namespace meshplan
