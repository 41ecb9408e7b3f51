// runtime_memory: <-> RuntimeMemorySpec (see runtime_memory_yaml.h).
#include "planner/config/runtime_memory_yaml.h"

#include <fmt/format.h>

namespace meshplan {
namespace {

constexpr double kBytesPerMiB = 1024.0 * 1024.0;
// 1e7 MiB (10 TiB) per item is beyond any device: a typo, not a size.
constexpr NumberRange kMiB{0, true, 1e7};

double MiBToBytes(const YamlFields& f, const std::string& key) {
  return f.Number(key, kMiB, 0) * kBytesPerMiB;
}

}  // namespace

RuntimeMemorySpec RuntimeMemoryFromYaml(const YamlFields& f) {
  f.AllowOnly({"cuda_context_MiB", "nccl_buffer_MiB_per_communicator", "cublas_workspace_MiB",
               "attention_workspace_MiB", "allocator_fragmentation"});
  RuntimeMemorySpec s;
  s.cuda_context_bytes = MiBToBytes(f, "cuda_context_MiB");
  s.nccl_buffer_bytes_per_communicator = MiBToBytes(f, "nccl_buffer_MiB_per_communicator");
  s.cublas_workspace_bytes = MiBToBytes(f, "cublas_workspace_MiB");
  s.attention_workspace_bytes = MiBToBytes(f, "attention_workspace_MiB");
  // Negative values fail here; [1, ...) below, with the half-open range in the message.
  s.allocator_fragmentation = f.Number("allocator_fragmentation", {0, true}, 0);
  if (s.allocator_fragmentation >= 1)
    f.Fail("allocator_fragmentation",
           fmt::format("expected a fraction in [0, 1) (the share of reserved memory no tensor "
                       "holds; 1 would mean nothing fits); got {}",
                       s.allocator_fragmentation));
  return s;
}

std::string RuntimeMemoryToYaml(const RuntimeMemorySpec& s) {
  if (s == RuntimeMemorySpec{}) return "";
  const auto mib = [](double bytes) { return FormatShifted(bytes / kBytesPerMiB, 0); };
  std::string out = "runtime_memory:\n";
  const std::string item = "  ";
  out += item + "cuda_context_MiB: " + mib(s.cuda_context_bytes) + "\n";
  out += item + "nccl_buffer_MiB_per_communicator: " + mib(s.nccl_buffer_bytes_per_communicator) + "\n";
  out += item + "cublas_workspace_MiB: " + mib(s.cublas_workspace_bytes) + "\n";
  out += item + "attention_workspace_MiB: " + mib(s.attention_workspace_bytes) + "\n";
  out += item + "allocator_fragmentation: " + FormatShifted(s.allocator_fragmentation, 0) + "\n";
  return out;
}

}  // namespace meshplan
