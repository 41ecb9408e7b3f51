#include "planner/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "planner/limits.h"

namespace meshplan {

const char* DescribeFileType(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

namespace {

// Closes the descriptor on every path out.
struct FileDescriptor {
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string ReadInputFile(const std::string& path, const std::string& field) {
  const InputLocation where{path};
  if (path.empty()) throw InputError(where, field, "empty path; expected a file");
  // O_NONBLOCK: opening a FIFO for reading must not wait for a writer.
  FileDescriptor file{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
  if (file.fd < 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) throw InputError(where, field, "no such file");
    throw InputError(where, field, std::string("cannot open the file: ") + std::strerror(error));
  }
  struct stat info {};
  if (::fstat(file.fd, &info) != 0)
    throw InputError(where, field, std::string("cannot stat the file: ") + std::strerror(errno));
  if (!S_ISREG(info.st_mode))
    throw InputError(where, field,
                     std::string("is ") + DescribeFileType(info.st_mode) + "; expected a regular file");
  if (info.st_size > kMaxInputFileBytes)
    throw InputError(where, field,
                     fmt::format("the file has {} bytes; expected at most {} (kMaxInputFileBytes, "
                                 "docs/limits.md)",
                                 info.st_size, kMaxInputFileBytes));
  // Regular files ignore O_NONBLOCK; read until EOF, never past the bound (st_size may be 0
  // for files whose size is unknown, such as those under /proc).
  std::string text;
  text.reserve(static_cast<size_t>(info.st_size));
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(file.fd, buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(where, field, std::string("cannot read the file: ") + std::strerror(errno));
    }
    text.append(buffer, static_cast<size_t>(n));
    if (static_cast<int64_t>(text.size()) > kMaxInputFileBytes)
      throw InputError(where, field,
                       fmt::format("the file has more than {} bytes (kMaxInputFileBytes, "
                                   "docs/limits.md)",
                                   kMaxInputFileBytes));
  }
  return text;
}

}  // namespace meshplan
