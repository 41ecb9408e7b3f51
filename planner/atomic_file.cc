#include "planner/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "planner/input_error.h"
#include "planner/output_path.h"

namespace meshplan {
namespace {

// Flushes a folder's entries (the rename) to disk; best effort, as not every file system can.
void SyncFolder(const std::filesystem::path& folder) {
  const int fd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(const std::string& path)
    : path_(path), tmp_(path + ".tmp." + std::to_string(::getpid())) {
  CheckOutputPath(path_, "");
  file_ = std::fopen(tmp_.c_str(), "wb");
  if (file_ == nullptr) Fail("open " + tmp_);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (file_ == nullptr) return;  // committed, or failed and cleaned up
  std::fclose(file_);
  std::remove(tmp_.c_str());
}

void AtomicFileWriter::Fail(const std::string& step) {
  const std::string reason = std::strerror(errno);
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  std::remove(tmp_.c_str());
  throw InputError({path_}, "", "cannot write the file (" + step + ": " + reason + ")");
}

void AtomicFileWriter::Write(std::string_view text) {
  if (file_ == nullptr) throw std::logic_error("cannot write " + path_ + " (already closed)");
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size()) Fail("write " + tmp_);
}

void AtomicFileWriter::Commit() {
  if (file_ == nullptr) throw std::logic_error("cannot write " + path_ + " (already closed)");
  const bool written = std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!written || !closed) {
    std::remove(tmp_.c_str());
    throw InputError({path_}, "", "cannot write the file (write " + tmp_ + ": " +
                                      std::strerror(errno) + ")");
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(tmp_.c_str());
    throw InputError({path_}, "", "cannot write the file (rename to " + path_ + ": " + reason + ")");
  }
  SyncFolder(std::filesystem::path(path_).parent_path());
}

void WriteFileAtomically(const std::string& path, const std::string& text) {
  AtomicFileWriter writer(path);
  writer.Write(text);
  writer.Commit();
}

}  // namespace meshplan
