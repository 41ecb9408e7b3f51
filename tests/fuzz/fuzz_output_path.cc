// Fuzz target: output paths. The first byte picks what already lies at the path (nothing, a
// regular file, a directory, a FIFO, a symlink to a directory, to a FIFO or to nothing,
// /dev/null), the next bytes name it inside a scratch folder, the rest is the text.
// WriteFileAtomically (planner/atomic_file.h) must write a regular file or refuse with an
// InputError, and a refusal must leave what was there as it was: anything else aborts.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "planner/atomic_file.h"
#include "planner/input_error.h"

namespace {

namespace fs = std::filesystem;
using meshplan::WriteFileAtomically;

enum Kind { kNothing, kRegular, kDirectory, kFifo, kLinkToDirectory, kLinkToFifo, kDangling,
            kDevNull, kNumKinds };

// What lies at `path` now: its kind as lstat sees it, or 0 when nothing does.
mode_t KindAt(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0 ? (info.st_mode & S_IFMT) : 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const fs::path scratch = [] {
    std::string pattern = (fs::temp_directory_path() / "fuzz_output_path_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    return fs::path(pattern);
  }();
  const Kind kind = static_cast<Kind>(data[0] % kNumKinds);
  // A name of 1 to 16 bytes, '/' and NUL mapped away, so the path stays in the scratch folder.
  const size_t name_size = 1 + data[1] % 16;
  std::string name;
  for (size_t i = 2; i < 2 + name_size && i < size; ++i)
    name += (data[i] == '/' || data[i] == 0) ? '_' : static_cast<char>(data[i]);
  if (name.empty() || name == "." || name == "..") name = "x";
  const size_t used = std::min(size, 2 + name_size);
  const std::string text(reinterpret_cast<const char*>(data) + used, size - used);

  fs::remove_all(scratch);
  fs::create_directories(scratch / "target_dir");
  const std::string fifo = (scratch / "target_fifo").string();
  ::mkfifo(fifo.c_str(), 0600);
  const std::string path = kind == kDevNull ? "/dev/null" : (scratch / name).string();
  std::error_code error;
  switch (kind) {
    case kRegular: WriteFileAtomically(path, "old"); break;
    case kDirectory: fs::create_directory(path, error); break;
    case kFifo: ::mkfifo(path.c_str(), 0600); break;
    case kLinkToDirectory: fs::create_directory_symlink(scratch / "target_dir", path, error); break;
    case kLinkToFifo: fs::create_symlink(fifo, path, error); break;
    case kDangling: fs::create_symlink(scratch / "absent", path, error); break;
    default: break;
  }
  const mode_t before = KindAt(path);
  try {
    WriteFileAtomically(path, text);
  } catch (const meshplan::InputError&) {
    if (KindAt(path) != before) std::abort();  // a refusal changed what was there
    if (KindAt(fifo) != S_IFIFO || !fs::is_directory(scratch / "target_dir")) std::abort();
    return 0;
  }
  // Written: only where a regular file (or nothing) was, and now a regular file.
  if (KindAt(path) != S_IFREG) std::abort();
  if (before == S_IFDIR || before == S_IFIFO || before == S_IFCHR) std::abort();
  if (before == S_IFLNK && kind != kDangling) std::abort();
  return 0;
}
