// A scratch directory for one test: a fresh /tmp/<prefix>_XXXXXX, removed with everything in
// it when the object goes. Its unique path can also mark the processes a test starts.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace meshplan::test {

struct ScratchDir {
  std::filesystem::path dir;
  explicit ScratchDir(const std::string& prefix) {
    std::string pattern = "/tmp/" + prefix + "_XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("ScratchDir: cannot create " + pattern);
    dir = pattern;
  }
  ~ScratchDir() { std::filesystem::remove_all(dir); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string Path(const std::string& name) const { return (dir / name).string(); }
  std::string Read(const std::string& name) const {
    std::ifstream in(dir / name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void Write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name) << text;
  }
};

}  // namespace meshplan::test
