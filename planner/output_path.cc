#include "planner/output_path.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "planner/input_error.h"
#include "planner/input_file.h"

namespace meshplan {
namespace {

InputError Refusal(const std::string& path, const std::string& flag, const std::string& why) {
  return flag.empty() ? InputError({path}, "", why) : InputError({"<command line>"}, flag, why);
}

}  // namespace

void CheckOutputPath(const std::string& path, const std::string& flag) {
  if (path.empty()) throw Refusal(path, flag, "an empty path; expected a file to write");
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return;  // a new file (or a dangling symlink, replaced by it)
    throw Refusal(path, flag, "cannot write " + path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(info.st_mode))
    throw Refusal(path, flag, path + " is " + DescribeFileType(info.st_mode) +
                                  "; expected a new file or a regular file to replace");
}

void CheckDistinctOutputs(const std::vector<std::pair<std::string, std::string>>& outputs) {
  const auto canonical = [](const std::string& path) {
    std::error_code error;
    const std::filesystem::path p = std::filesystem::weakly_canonical(path, error);
    return error ? std::filesystem::path(path).lexically_normal() : p;
  };
  for (size_t i = 0; i < outputs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (!outputs[i].second.empty() && !outputs[j].second.empty() &&
          canonical(outputs[i].second) == canonical(outputs[j].second))
        throw InputError({"<command line>"}, outputs[i].first,
                         outputs[i].second + " is also the file of " + outputs[j].first +
                             "; expected a different file for each output");
}

}  // namespace meshplan
