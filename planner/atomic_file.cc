#include "planner/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

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

void WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const auto fail = [&](const std::string& step) {
    const std::string reason = std::strerror(errno);
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot write " + path + " (" + step + ": " + reason + ")");
  };
  std::FILE* file = std::fopen(tmp.c_str(), "wb");
  if (file == nullptr) fail("open " + tmp);
  const bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size() &&
                       std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0;
  if (std::fclose(file) != 0 || !written) fail("write " + tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("rename to " + path);
  SyncFolder(std::filesystem::path(path).parent_path());
}

}  // namespace meshplan
