// Runtime memory on GPUs (planner/cost/runtime_memory.h, docs/memory_model.md "Runtime
// memory on GPUs"): the communicators the executor creates, the lines by hand for one plan on
// h100-sxm through `meshplan estimate`, the CPU profile's zeros, the hardware files' values,
// round trips through the writers, and hardware-file errors (exit code 2, file:line, field).
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "planner/config/config_loader.h"
#include "planner/config/hardware_yaml.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/memory_model.h"
#include "planner/cost/runtime_memory.h"
#include "tests/cli_run.h"

namespace meshplan {
namespace {

namespace fs = std::filesystem;
constexpr double MiB = 1024.0 * 1024.0;

// The eight tensor lines of a breakdown (everything but the runtime lines).
double TensorBytes(const nlohmann::json& breakdown) {
  double sum = 0;
  for (const char* key : {"params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes",
                          "logits_bytes", "comm_buffer_bytes", "gathered_params_bytes",
                          "transient_bytes"})
    sum += breakdown[key].get<double>();
  return sum;
}

TEST_CASE("a rank joins one NCCL communicator per mesh dimension > 1, plus dp x cp",
          "[planner][memory][runtime]") {
  CHECK(CountNcclCommunicators(ParsePlanString("dp=1")) == 0);
  CHECK(CountNcclCommunicators(ParsePlanString("dp=8,zero=3")) == 1);
  CHECK(CountNcclCommunicators(ParsePlanString("dp=2,tp=2,pp=2")) == 3);
  // dp and cp both > 1: the weight replicas get their own group (executor/parallel/device_mesh.cc).
  CHECK(CountNcclCommunicators(ParsePlanString("dp=2,cp=2")) == 3);
  // dp = 1: the cp communicator is the weight-replica group; no extra one.
  CHECK(CountNcclCommunicators(ParsePlanString("dp=1,cp=4,tp=2")) == 2);
  CHECK(CountNcclCommunicators(ParsePlanString("dp=2,tp=2,pp=2,cp=2")) == 5);
}

TEST_CASE("AddRuntimeMemory: the lines of runtime_memory.h's contract",
          "[planner][memory][runtime]") {
  MemoryBreakdown b;
  b.activations_bytes = 1000;
  b.total_bytes = 1000;
  SECTION("a zero spec changes nothing") {
    AddRuntimeMemory(RuntimeMemorySpec{}, ParsePlanString("dp=2,tp=2"), &b);
    CHECK(b.total_bytes == 1000);
    CHECK(b.runtime_bytes() == 0);
  }
  SECTION("every line") {
    RuntimeMemorySpec s;
    s.cuda_context_bytes = 10;
    s.nccl_buffer_bytes_per_communicator = 5;
    s.cublas_workspace_bytes = 3;
    s.attention_workspace_bytes = 2;
    s.allocator_fragmentation = 0.2;
    AddRuntimeMemory(s, ParsePlanString("dp=1,tp=2"), &b);  // one communicator: tp
    CHECK(b.cuda_context_bytes == 10);
    CHECK(b.nccl_buffers_bytes == 5);
    CHECK(b.workspace_bytes == 3 + 2);
    // The allocator holds tensors + workspaces; reserved = held / (1 - 0.2).
    CHECK(b.allocator_overhead_bytes == Approx((1000.0 + 5) * 0.2 / 0.8));
    CHECK(b.total_bytes == Approx(1000 + 10 + 5 + 5 + 1005.0 * 0.25));
  }
}

TEST_CASE("the hardware files give the cited runtime memory, the CPU profile none",
          "[planner][memory][runtime][config]") {
  const RuntimeMemorySpec h100 = LoadGpu("h100-sxm").runtime_memory;
  CHECK(h100.cuda_context_bytes == 400 * MiB);
  CHECK(h100.nccl_buffer_bytes_per_communicator == 128 * MiB);  // 4 MiB x 16 channels x 2
  CHECK(h100.cublas_workspace_bytes == 32 * MiB);               // PyTorch on sm90
  CHECK(h100.attention_workspace_bytes == 0);
  CHECK(h100.allocator_fragmentation == 0.15);
  CHECK(LoadGpu("a100-80gb").runtime_memory.cublas_workspace_bytes == 8'519'680);  // :4096:2:16:8
  CHECK(LoadGpu("cpu-ci").runtime_memory == RuntimeMemorySpec{});
}

TEST_CASE("runtime memory on h100-sxm by hand: llama2-7b, dp=2, tp=2, pp=2",
          "[planner][memory][runtime][cli]") {
  const test::CliResult r = test::RunMeshplan(
      "estimate --format json --model llama2-7b --cluster 8xH100 --plan dp=2,tp=2,pp=2 "
      "--global-batch 64 --seq 4096");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.output);
  const nlohmann::json& m = j["memory"]["breakdown"];
  // One process per GPU: one CUDA context, 400 MiB.
  const double context = 400 * MiB;
  // Communicators: dp (2), pp (2), tp (2); cp = 1, and with cp = 1 the dp x cp group is
  // the dp communicator: 3 x 128 MiB.
  const double nccl = 3 * 128 * MiB;
  // One cuBLAS workspace (one thread, one stream) of 32 MiB on Hopper; no fixed attention one.
  const double workspace = 32 * MiB;
  // The allocator holds the tensors and the workspace; 15% of what it reserves is free, in
  // what the step allocates and frees (not the model states, allocated once).
  const double tensors = TensorBytes(m);
  const double states = m["params_bytes"].get<double>() + m["grads_bytes"].get<double>() +
                        m["optimizer_bytes"].get<double>();
  const double allocator = (tensors - states + workspace) * 0.15 / (1 - 0.15);
  CHECK(m["cuda_context_bytes"].get<double>() == context);
  CHECK(m["nccl_buffers_bytes"].get<double>() == nccl);
  CHECK(m["workspace_bytes"].get<double>() == workspace);
  CHECK(m["allocator_overhead_bytes"].get<double>() == Approx(allocator).epsilon(1e-12));
  const double total = tensors + context + nccl + workspace + allocator;
  CHECK(j["memory"]["total_bytes"].get<double>() == Approx(total).epsilon(1e-12));
  // fits includes them: the total against the 81,559 MiB of an H100 SXM.
  CHECK(j["fits"].get<bool>() == (total <= 81'559 * MiB));

  // The text breakdown names every line.
  const test::CliResult text = test::RunMeshplan(
      "estimate --model llama2-7b --cluster 8xH100 --plan dp=2,tp=2,pp=2 --global-batch 64 "
      "--seq 4096");
  REQUIRE(text.exit_code == 0);
  for (const char* line : {"CUDA context", "NCCL buffers", "workspaces (cuBLAS, attention)",
                           "allocator overhead"})
    CHECK(text.output.find(line) != std::string::npos);
}

TEST_CASE("on the CPU profile every runtime line is 0 and the total is the tensors'",
          "[planner][memory][runtime]") {
  const ModelSpec model = LoadModel("tiny-llama");
  const ClusterSpec cpu = LoadCluster("cpu-1x");
  TrainingSpec training;
  training.global_batch = 4;
  training.seq_len = 256;
  training.precision = Precision::kFp32;
  const ParallelPlan plan = ParsePlanString("dp=1");
  const PlanCost cost = Estimate(model, cpu, training, plan);
  CHECK(cost.memory.cuda_context_bytes == 0);
  CHECK(cost.memory.nccl_buffers_bytes == 0);
  CHECK(cost.memory.workspace_bytes == 0);
  CHECK(cost.memory.allocator_overhead_bytes == 0);
  CHECK(cost.memory.total_bytes ==
        EstimateMemory(model, training, plan, MemoryModel::kDetailed).total_bytes);
}

TEST_CASE("runtime memory survives the hardware and plan-file writers exactly",
          "[planner][memory][runtime][config]") {
  GpuSpec gpu = LoadGpu("h100-sxm");
  gpu.runtime_memory.allocator_fragmentation = 0.1 + 0.2;
  gpu.runtime_memory.cublas_workspace_bytes = 8'519'681;
  gpu.comm_overlaps_compute = false;  // not a runtime line, but written beside them
  const GpuSpec back = GpuFromYamlText(GpuSpecToYaml(gpu, {}), "written.yaml");
  CHECK(back.runtime_memory == gpu.runtime_memory);
  CHECK_FALSE(back.comm_overlaps_compute);
  CHECK(back.matmul_ceiling_efficiency == gpu.matmul_ceiling_efficiency);  // 0.801 (MAMF)
  CHECK(back.matmul_fp8_ceiling_efficiency == gpu.matmul_fp8_ceiling_efficiency);  // 0.770
  CHECK(back.matmul_fp8_split_accumulate_efficiency == gpu.matmul_fp8_split_accumulate_efficiency);
  CHECK(gpu.matmul_fp8_split_accumulate_efficiency == Approx(0.870));  // written, not the default
  CHECK(back.attention_cudnn_efficiency == gpu.attention_cudnn_efficiency);
  CHECK(back.attention_flash3_efficiency == gpu.attention_flash3_efficiency);
  CHECK(back.kernel_shape == gpu.kernel_shape);  // gemm_k_overhead_fp8 814
  CHECK(gpu.kernel_shape.gemm_k_overhead_fp8 == 814);
  // The DP overlap slowdown: the file's measured figure, and without one the TP figure.
  CHECK(gpu.dp_overlap_slowdown == 0.189);
  CHECK(gpu.DpOverlapSlowdown() == 0.189);
  CHECK(back.dp_overlap_slowdown == gpu.dp_overlap_slowdown);
  GpuSpec unset = gpu;
  unset.dp_overlap_slowdown = -1;
  const GpuSpec unset_back = GpuFromYamlText(GpuSpecToYaml(unset, {}), "written.yaml");
  CHECK(unset_back.dp_overlap_slowdown == -1);
  CHECK(unset_back.DpOverlapSlowdown() == gpu.comm_overlap_slowdown);
  // A CPU profile writes no section at all.
  CHECK(GpuSpecToYaml(LoadGpu("cpu-ci"), {}).find("runtime_memory") == std::string::npos);

  const fs::path dir = fs::temp_directory_path() / ("meshplan_runtime_plan_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  PlanFile p;
  p.model = LoadModel("llama2-7b");
  p.cluster = LoadCluster("8xH100");
  p.cluster.gpu = gpu;
  p.training.global_batch = 64;
  p.training.seq_len = 4096;
  p.plan = ParsePlanString("dp=8");
  SavePlanFile((dir / "plan.yaml").string(), p);
  CHECK(LoadPlanFile((dir / "plan.yaml").string()).cluster.gpu == p.cluster.gpu);
  fs::remove_all(dir);
}

// A hardware file whose 7th line is `bad_line`, used by a cluster file: meshplan estimate
// must exit 2 naming hardware.yaml:7 and the field.
TEST_CASE("bad runtime_memory values exit 2 with file:line and the field",
          "[planner][memory][runtime][errors]") {
  struct Case {
    const char* line;
    const char* field;
    const char* expectation;
  };
  const Case c = GENERATE(
      Case{"  cuda_context_MiB: -1", "runtime_memory.cuda_context_MiB", "out of range"},
      Case{"  cublas_workspace_MiB: lots", "runtime_memory.cublas_workspace_MiB", "number"},
      Case{"  nccl_buffer_MiB_per_communicator: [4]", "runtime_memory.nccl_buffer_MiB_per_communicator",
           "number"},
      Case{"  allocator_fragmentation: 1", "runtime_memory.allocator_fragmentation", "[0, 1)"},
      Case{"  allocator_fragmentation: 1.5", "runtime_memory.allocator_fragmentation", "[0, 1)"},
      Case{"  allocator_fragmentation: -0.1", "runtime_memory.allocator_fragmentation", "out of range"},
      Case{"  nccl_buffers_MiB: 4", "nccl_buffers_MiB", "cuda_context_MiB"});
  const fs::path dir = fs::temp_directory_path() / ("meshplan_runtime_err_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "hardware.yaml") << "name: bad-gpu\n"
                                          "memory_MiB: 81559\n"
                                          "peak_TFLOPs: {fp32: 66.9, bf16: 989.4}\n"
                                          "memory_bandwidth_TBps: 3.35\n"
                                          "runtime_memory:\n"
                                          "  attention_workspace_MiB: 0\n"
                                       << c.line << "\n";
  std::ofstream(dir / "cluster.yaml") << "gpu: hardware.yaml\nnodes: 1\ngpus_per_node: 8\n"
                                         "intra_node: {bandwidth_GBps: 450, latency_us: 3}\n"
                                         "inter_node: {bandwidth_GBps: 50, latency_us: 6}\n";
  const test::CliResult r = test::RunMeshplan("estimate --model llama2-7b --plan dp=8 --cluster '" +
                                              (dir / "cluster.yaml").string() + "'");
  fs::remove_all(dir);
  INFO(c.line << "\n" << r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("hardware.yaml:7:") != std::string::npos);
  CHECK(r.output.find(c.field) != std::string::npos);
  CHECK(r.output.find(c.expectation) != std::string::npos);
}

}  // namespace
}  // namespace meshplan
