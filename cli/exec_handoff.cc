#include "cli/exec_handoff.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <vector>

#include "planner/input_error.h"

namespace meshplan {

bool IsExecutorCommand(const std::string& subcommand) {
  return subcommand == "run" || subcommand == "calibrate";
}

bool CalibratesFromLogs(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != "calibrate") return false;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--from-logs" || arg.rfind("--from-logs=", 0) == 0) return true;
  }
  return false;
}

std::string ExecutorPath() {
  if (const char* env = std::getenv("MESHPLAN_EXEC"); env != nullptr && *env != '\0') return env;
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "meshplan-exec";
  return (self.parent_path() / "meshplan-exec").string();
}

int HandOverToExecutor(int argc, char** argv) {
  const std::string exe = ExecutorPath();
  std::vector<char*> args(argv, argv + argc);
  args[0] = const_cast<char*>(exe.c_str());
  args.push_back(nullptr);
  ::execv(exe.c_str(), args.data());
  const int why = errno;
  std::cerr << "meshplan: error: `meshplan " << argv[1] << "` is done by meshplan-exec, the "
            << "executable that links LibTorch, and it cannot be started from " << exe << " ("
            << std::strerror(why) << "). scripts/build.sh builds it against the torch wheel "
            << "(scripts/install_torch_wheel.sh; not with MESHPLAN_SKIP_TORCH_WHEEL=1), or set "
            << "MESHPLAN_EXEC to its path.\n";
  return kExitBadInput;
}

}  // namespace meshplan
