// Framework profiles (planner/framework_spec.h, configs/frameworks/): loading with located
// errors, what each field changes in the prediction, and --framework on the commands.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <string>

#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/memory_model.h"
#include "planner/cost/model_state_memory.h"
#include "planner/cost/step_work.h"
#include "tests/planner/test_util.h"

namespace meshplan {
namespace {

using test::ErrorOf;

// A valid profile, one key per line, so that a test can break one line.
const char* kProfile =
    "version: \"1.0\"\n"
    "kernels: fused\n"
    "attention: fused\n"
    "main_grads: fp32\n"
    "fp8_states: fp32\n"
    "grad_accumulation: fused\n"
    "optimizer: fused-adam\n"
    "recompute: [none, full]\n"
    "zero: [0, 1]\n"
    "zero1_gradients: in-place\n"
    "log_format: megatron\n";

// A training spec run by the shipped profile `framework`.
TrainingSpec Under(const char* framework, int64_t global_batch, int64_t seq_len,
                   Precision precision) {
  return {.global_batch = global_batch, .seq_len = seq_len, .precision = precision,
          .framework = LoadFramework(framework)};
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  text.replace(text.find(from), from.size(), to);
  return text;
}

TEST_CASE("every shipped profile loads, and meshplan's is the default spec",
          "[planner][framework]") {
  const std::vector<std::string> names = ListFrameworks();
  for (const char* name : {"megatron-core", "megatron-lm-2021", "megatron-lm-2022", "nemo",
                           "torchtitan", "pytorch", "deepspeed", "meshplan"}) {
    INFO(name);
    CHECK(std::find(names.begin(), names.end(), name) != names.end());
    const FrameworkSpec f = LoadFramework(name);
    CHECK(f.name == name);
    CHECK(!f.version.empty());
    CHECK(f.recompute.none);
  }
  CHECK(LoadFramework("meshplan") == FrameworkSpec{});
  CHECK(LoadFramework("megatron-core").log_format == LogFormat::kMegatron);
  CHECK(LoadFramework("torchtitan").calibration.fit_compute);
  CHECK(LoadFramework("MEGATRON-CORE").name == "megatron-core");  // any case, as other configs
}

TEST_CASE("a profile written by FrameworkToYamlText reads back to the same spec",
          "[planner][framework]") {
  for (const std::string& name : ListFrameworks()) {
    INFO(name);
    FrameworkSpec spec = LoadFramework(name);
    spec.calibration.compute_scale = 0.8125;
    spec.calibration.bandwidth_scale = 1.0 / 3;
    const std::string text = FrameworkToYamlText(spec, "fitted from\ntwo logs");
    CHECK(text.rfind("# fitted from\n# two logs\n", 0) == 0);
    CHECK(FrameworkFromYamlText(text, name + ".yaml") == spec);
  }
}

TEST_CASE("the default framework: megatron-core on a GPU, meshplan on a CPU profile",
          "[planner][framework]") {
  CHECK(std::string(DefaultFrameworkName(LoadGpu("h100-sxm"))) == "megatron-core");
  CHECK(std::string(DefaultFrameworkName(LoadGpu("cpu-ci"))) == "meshplan");
}

TEST_CASE("a hostile profile is refused with file, line, field and the allowed values",
          "[planner][framework][hostile]") {
  CHECK(FrameworkFromYamlText(kProfile, "ok.yaml").name == "ok");
  struct Case {
    std::string text, field, expect;
    int line;
  };
  const Case cases[] = {
      {Replace(kProfile, "kernels: fused", "kernels: turbo"), "kernels",
       "megatron-2021, eager, fused, torchtitan-2024", 2},
      {std::string(kProfile) + "norm: triton\n", "norm", "unfused, fused", 12},
      {Replace(kProfile, "attention: fused", "attention: sparse"), "attention",
       "fused, naive, auto", 3},
      {Replace(kProfile, "main_grads: fp32", "main_grads: fp16"), "main_grads", "param, fp32", 4},
      {Replace(kProfile, "grad_accumulation: fused", "grad_accumulation: lazy"),
       "grad_accumulation", "fused, separate", 6},
      {Replace(kProfile, "recompute: [none, full]", "recompute: [full]"), "recompute",
       "must offer 'none'", 8},
      {Replace(kProfile, "recompute: [none, full]", "recompute: [none, half]"), "recompute",
       "none, selective, full, op, every", 8},
      {Replace(kProfile, "zero: [0, 1]", "zero: [1, 4]"), "zero", "0, 1, 2, 3; got '4'", 9},
      {Replace(kProfile, "zero: [0, 1]", "zero: [1, 1]"), "zero", "given twice", 9},
      {Replace(kProfile, "zero: [0, 1]", "zero: []"), "zero", "an empty list", 9},
      {Replace(kProfile, "zero: [0, 1]\n", ""), "zero", "missing", 0},
      {Replace(kProfile, "zero1_gradients: in-place", "zero1_gradients: both"),
       "zero1_gradients", "in-place, shard-copy", 10},
      {std::string(kProfile) + "allocator_fragmentation: 1.5\n", "allocator_fragmentation",
       "[0, 1)", 12},
      {std::string(kProfile) + "turbo: true\n", "turbo", "", 12},
      {std::string(kProfile) + "master_weights: fp16\n", "master_weights", "fp32, remainder", 12},
      {std::string(kProfile) + "zero3_buffers: pinned\n", "zero3_buffers", "views, copies", 12},
      {std::string(kProfile) + "zero3_end_parts: trunk\n", "zero3_end_parts", "groups, root", 12},
      {std::string(kProfile) + "ddp_buckets: shared\n", "ddp_buckets", "views, copies", 12},
      {std::string(kProfile) + "param_gather: lazy\n", "param_gather", "after-step, next-forward", 12},
      {std::string(kProfile) + "offload: [act+cpu]\n", "offload",
       "act, opt, params joined by '+' (e.g. [act, opt+params]); got 'act+cpu'", 12},
      {std::string(kProfile) + "offload: [opt+opt]\n", "offload", "got 'opt+opt'", 12},
      {std::string(kProfile) + "offload_act_alone: true\n", "offload_act_alone",
       "needs an `offload:` list", 12},
      {std::string(kProfile) + "tp_overlap: partial\n", "tp_overlap", "any, with-sp, none", 12},
      {std::string(kProfile) + "pp_overlap: always\n", "pp_overlap", "none, interleaved", 12},
      {std::string(kProfile) + "tp_backward_overlap: all\n", "tp_backward_overlap",
       "none, column-gemms", 12},
      {std::string(kProfile) + "sequence_parallel: sometimes\n", "sequence_parallel",
       "optional, always, never", 12},
      {std::string(kProfile) + "prefetch: [0, 5]\n", "prefetch", "from 0 to 4; got '5'", 12},
      {std::string(kProfile) + "prefetch: [0]\n", "prefetch", "must offer 1", 12},
      {std::string(kProfile) + "prefetch: [1, 1]\n", "prefetch", "1 given twice", 12},
      {std::string(kProfile) + "parallelism: [tp, sp]\n", "parallelism",
       "tp, cp, ep; got 'sp'", 12},
      {std::string(kProfile) + "parallelism: [ep, ep]\n", "parallelism", "ep given twice", 12},
      {std::string(kProfile) + "schedules: [zb_h2]\n", "schedules",
       "gpipe, 1f1b, interleaved, zb_h1; got 'zb_h2'", 12},
      {std::string(kProfile) + "schedules: [1f1b, 1f1b]\n", "schedules", "1f1b given twice", 12},
      {std::string(kProfile) + "zero_pipelined: [4]\n", "zero_pipelined", "0, 1, 2, 3; got '4'", 12},
      {std::string(kProfile) + "reduce_bucket_elements: -1\n", "reduce_bucket_elements", "", 12},
      {std::string(kProfile) + "built_on: jax\n", "built_on", "megatron-core, megatron-lm-2021", 12},
      {std::string(kProfile) + "version_of: jax\n", "version_of", "megatron-core, megatron-lm-2021", 12},
      {Replace(kProfile, "log_format: megatron", "log_format: nemo"), "log_format",
       "meshplan, megatron, torchtitan, deepspeed, pytorch-hook", 11},
      {std::string(kProfile) + "calibration:\n  fittable: [mfu]\n", "calibration.fittable",
       "compute_scale, bandwidth_scale", 13},
      {std::string(kProfile) + "calibration:\n  compute_scale: 0\n", "calibration.compute_scale",
       "", 13},
      {Replace(kProfile, "optimizer: fused-adam\n", ""), "optimizer", "missing", 0},
      {Replace(kProfile, "optimizer: fused-adam", "optimizer: sgd"), "optimizer",
       "fused-adam, foreach-adam, megatron-fp16", 0},
      {std::string(kProfile) + "loss: chunked\n", "loss",
       "fp32-in-place, cross-entropy, cross-entropy-fp32, cross-entropy-fp32-freed", 12},
      {std::string(kProfile) + "attention_kernel: sdpa\n", "attention_kernel",
       "flash2, flash3, cudnn", 12},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    const InputError e = ErrorOf([&] { FrameworkFromYamlText(c.text, "bad.yaml"); });
    CHECK(e.field() == c.field);
    CHECK_THAT(e.what(), Catch::Contains("bad.yaml") && Catch::Contains(c.expect));
    if (c.line > 0) CHECK(e.where().line == c.line);
  }
  // built_on names another profile, never the profile itself.
  const InputError itself =
      ErrorOf([] { FrameworkFromYamlText(std::string(kProfile) + "built_on: nemo\n", "nemo.yaml"); });
  CHECK(itself.field() == "built_on");
  CHECK(FrameworkFromYamlText(std::string(kProfile) + "built_on: nemo\n", "mine.yaml").built_on ==
        "nemo");
  // version_of too: an earlier version names the later one's profile.
  const InputError own_version = ErrorOf(
      [] { FrameworkFromYamlText(std::string(kProfile) + "version_of: torchtitan\n", "torchtitan.yaml"); });
  CHECK(own_version.field() == "version_of");
  CHECK(LoadFramework("torchtitan-2024-04").version_of == "torchtitan");
  CHECK(FrameworkFromYamlText(std::string(kProfile) + "norm: fused\n", "mine.yaml").fused_norm);
  CHECK_FALSE(FrameworkFromYamlText(kProfile, "mine.yaml").fused_norm);
  CHECK(FrameworkFromYamlText(kProfile, "mine.yaml").attention_kernel == AttentionKernel::kFlash2);
  CHECK(FrameworkFromYamlText(std::string(kProfile) + "attention_kernel: cudnn\n", "mine.yaml")
            .attention_kernel == AttentionKernel::kCudnn);
  const InputError unknown = ErrorOf([] { LoadFramework("jax"); });
  CHECK(unknown.field() == "framework");
  CHECK_THAT(unknown.what(), Catch::Contains("megatron-core") && Catch::Contains("torchtitan"));
}

TEST_CASE("main_grads fp32: 18 bytes of model state per parameter and fp32 gradient traffic",
          "[planner][framework]") {
  TrainingSpec t;
  t.precision = Precision::kMixed;
  CHECK(BytesPerParamFor(t).grad == 2);
  t.framework = LoadFramework("megatron-core");
  const BytesPerParam megatron = BytesPerParamFor(t);
  CHECK(megatron.param + megatron.grad + megatron.optimizer == 18);
  t.precision = Precision::kFp8;  // Transformer Engine: fp32 master and Adam states
  CHECK(BytesPerParamFor(t).optimizer == 12);
  t.framework = FrameworkSpec{};
  CHECK(BytesPerParamFor(t).optimizer == 4);  // the executor's bf16 states

  const ModelSpec model = LoadModel("llama2-7b");
  TrainingSpec mixed{.global_batch = 16, .seq_len = 4096, .precision = Precision::kMixed, .framework = {}};
  ParallelPlan plan;
  plan.dp = 8;
  const StepWork executor = BuildStepWork(model, mixed, plan);
  mixed.framework = LoadFramework("megatron-core");
  const StepWork megatron_work = BuildStepWork(model, mixed, plan);
  CHECK(executor.grad_bytes == 2);
  CHECK(megatron_work.grad_bytes == 4);
  // The optimizer reads the fp32 gradient: 2 bytes more than the bf16 one.
  CHECK(megatron_work.optimizer_bytes_per_param == executor.optimizer_bytes_per_param + 2);
}

// NeMo 24.07's Apex DistributedFusedAdam (configs/frameworks/nemo.yaml): bf16 gradients
// (grad_sync_dtype=bf16) and the fp32 master kept as a 16-bit remainder of the bf16 weight.
TEST_CASE("master_weights remainder and bf16 gradients: NeMo 24.07's 14 bytes per parameter",
          "[planner][framework]") {
  TrainingSpec t;
  t.precision = Precision::kFp8;
  t.framework = LoadFramework("nemo");
  CHECK(t.framework.master_weights == MasterWeights::kRemainder);
  const BytesPerParam nemo = BytesPerParamFor(t);
  CHECK(nemo.param == 2);
  CHECK(nemo.grad == 2);
  CHECK(nemo.optimizer == 2 + 4 + 4);
  t.framework = LoadFramework("megatron-core");
  const BytesPerParam megatron = BytesPerParamFor(t);
  CHECK(megatron.optimizer - nemo.optimizer == 2);  // the fp32 master's upper half
  CHECK(megatron.grad - nemo.grad == 2);            // fp32 main_grad

  // The data-parallel reduce-scatter moves bf16, half of Megatron-Core's fp32 gradients.
  const ModelSpec model = LoadModel("llama2-7b");
  TrainingSpec fp8{.global_batch = 16, .seq_len = 4096, .precision = Precision::kFp8, .framework = {}};
  ParallelPlan plan;
  plan.dp = 8;
  plan.zero_stage = 1;
  fp8.framework = LoadFramework("nemo");
  CHECK(BuildStepWork(model, fp8, plan).grad_bytes == 2);
  fp8.framework = LoadFramework("megatron-core");
  CHECK(BuildStepWork(model, fp8, plan).grad_bytes == 4);
}

// FSDP2 (torchtitan) copies around its ZeRO-3 collectives: the gathered parameters out of the
// all-gather buffer (forward and backward), the gradients cast to fp32 and into the
// reduce-scatter buffer; FSDP1-style views (the same profile with views) copy nothing.
TEST_CASE("zero3_buffers copies: FSDP2's copy-out, cast and copy-in per block and micro-batch",
          "[planner][framework]") {
  const ModelSpec model = LoadModel("llama3-8b");
  TrainingSpec t = Under("torchtitan", 16, 4096, Precision::kMixed);
  REQUIRE(t.framework.zero3_buffers == Zero3Buffers::kCopies);
  ParallelPlan plan;
  plan.dp = 8;
  plan.zero_stage = 3;
  const StepWork copies = BuildStepWork(model, t, plan);
  t.framework.zero3_buffers = Zero3Buffers::kViews;
  const StepWork views = BuildStepWork(model, t, plan);
  const double P = static_cast<double>(copies.block.params);
  REQUIRE(copies.param_bytes == 2);
  REQUIRE(copies.grad_bytes == 4);  // reduce_dtype fp32
  CHECK(copies.block.forward.memory_bytes - views.block.forward.memory_bytes == Approx(4 * P));
  CHECK(copies.block.backward_input.memory_bytes - views.block.backward_input.memory_bytes ==
        Approx(4 * P));
  // Cast bf16 -> fp32 (read 2, write 4), then copy in (read 4, write 4).
  CHECK(copies.block.backward_weight.memory_bytes - views.block.backward_weight.memory_bytes ==
        Approx(14 * P));
  // ZeRO-1 has no such copies, whatever the profile says.
  plan.zero_stage = 1;
  t.framework.zero3_buffers = Zero3Buffers::kCopies;
  const StepWork zero1 = BuildStepWork(model, t, plan);
  t.framework.zero3_buffers = Zero3Buffers::kViews;
  CHECK(zero1.block.forward.memory_bytes == BuildStepWork(model, t, plan).block.forward.memory_bytes);
}

// param_gather next-forward (megatron-core's --overlap-param-gather, NeMo's
// overlap_param_sync): ZeRO-1/2's all-gather of the updated parameters runs beside the next
// step's first forward; the time it hides comes off the step, nothing else changes.
TEST_CASE("param_gather next-forward: ZeRO-1's parameter all-gather behind the first forward",
          "[planner][framework]") {
  for (const char* name : {"megatron-core", "nemo"})
    CHECK(LoadFramework(name).param_gather == ParamGather::kNextForward);
  for (const char* name : {"deepspeed", "meshplan", "pytorch", "torchtitan"})
    CHECK(LoadFramework(name).param_gather == ParamGather::kAfterStep);
  const ModelSpec model = LoadModel("llama2-7b");
  const ClusterSpec cluster = LoadCluster("64xH100");
  TrainingSpec t = Under("megatron-core", 256, 4096, Precision::kMixed);
  ParallelPlan plan;
  plan.dp = 64;
  plan.zero_stage = 1;
  const PlanCost next = Estimate(model, cluster, t, plan);
  t.framework.param_gather = ParamGather::kAfterStep;
  const PlanCost after = Estimate(model, cluster, t, plan);
  CHECK(next.time.exposed_comm_s[MeshDim::kDp] < after.time.exposed_comm_s[MeshDim::kDp]);
  CHECK(next.time.total_s < after.time.total_s);
  CHECK(next.comm_bytes_per_step[MeshDim::kDp] == after.comm_bytes_per_step[MeshDim::kDp]);
  CHECK(next.memory.total_bytes == after.memory.total_bytes);
  // Only ZeRO-1/2 gather updated parameters; dp_overlap=0 keeps them after the step.
  for (int zero : {0, 3}) {
    plan.zero_stage = zero;
    CHECK_FALSE(BuildStepWork(model, Under("megatron-core", 256, 4096, Precision::kMixed), plan)
                    .param_gather_in_forward);
  }
  plan.zero_stage = 1;
  plan.dp_comm_overlap = false;
  const double off_after = Estimate(model, cluster, t, plan).time.total_s;
  t.framework.param_gather = ParamGather::kNextForward;
  CHECK(Estimate(model, cluster, t, plan).time.total_s == off_after);
}

// attention_kernel: the fused core's kernel sets its rate, from the hardware file's figure for
// that kernel, and nothing else: the same FLOPs, the same kernels, the same memory. A GPU whose
// file has no figure for the kernel times it as FlashAttention-2.
TEST_CASE("attention_kernel: the fused core at its kernel's rate, the rest unchanged",
          "[planner][framework]") {
  const ModelSpec model = LoadModel("llama3-8b");
  TrainingSpec t = Under("torchtitan", 8, 8192, Precision::kBf16);
  REQUIRE(t.framework.attention_kernel == AttentionKernel::kFlash2);
  ParallelPlan plan;
  plan.dp = 8;
  const StepWork flash2 = BuildStepWork(model, t, plan);
  t.framework.attention_kernel = AttentionKernel::kCudnn;
  const StepWork cudnn = BuildStepWork(model, t, plan);
  REQUIRE(cudnn.block.attention_forward.flash.size == 1);
  CHECK(cudnn.block.attention_forward.flash[0].kernel == AttentionKernel::kCudnn);
  CHECK(cudnn.block.attention_backward.flash[0].kernel == AttentionKernel::kCudnn);
  CHECK(cudnn.block.forward.attention_flops == flash2.block.forward.attention_flops);
  CHECK(cudnn.block.forward.memory_bytes == flash2.block.forward.memory_bytes);
  CHECK(cudnn.block.forward.kernels == flash2.block.forward.kernels);

  GpuSpec gpu = LoadGpu("a100-80gb");
  REQUIRE(gpu.attention_cudnn_efficiency == 0);  // no figure: as FlashAttention-2
  const ComputeRates plain = RatesFor(gpu, t.precision);
  CHECK(TimeOf(cudnn.block.forward, plain).attention_s ==
        Approx(TimeOf(flash2.block.forward, plain).attention_s));
  gpu.attention_cudnn_efficiency = 2 * gpu.attention_efficiency;
  const ComputeRates rates = RatesFor(gpu, t.precision);
  for (auto pass : {&PartWork::forward, &PartWork::backward_input}) {
    const ComputeTime fast = TimeOf(cudnn.block.*pass, rates);
    const ComputeTime slow = TimeOf(flash2.block.*pass, rates);
    CHECK(fast.attention_s == Approx(slow.attention_s / 2));
    CHECK(fast.matmul_s == Approx(slow.matmul_s));
    CHECK(fast.memory_s == Approx(slow.memory_s));
  }
  // Memory: the same tensors whatever the kernel.
  TrainingSpec as_flash2 = t;
  as_flash2.framework.attention_kernel = AttentionKernel::kFlash2;
  CHECK(EstimateMemory(model, t, plan, MemoryModel::kDetailed).total_bytes ==
        EstimateMemory(model, as_flash2, plan, MemoryModel::kDetailed).total_bytes);
}

// PyTorch DDP's default buckets (the pytorch profile): once per step each gradient is copied
// into its bucket and back (4 x grad bytes per parameter, 1/m of it per micro-batch), and the
// buckets hold a second copy of the gradients; only without ZeRO and on more than one replica.
TEST_CASE("ddp_buckets copies: DDP's bucket copies of the gradients, in time and in memory",
          "[planner][framework]") {
  const ModelSpec model = LoadModel("llama2-7b");
  TrainingSpec t = Under("pytorch", 16, 1024, Precision::kBf16);
  REQUIRE(t.framework.ddp_buckets == DdpBuckets::kCopies);
  ParallelPlan plan;
  plan.dp = 4;
  plan.micro_batch = 2;  // 2 micro-batches per step
  const StepWork copies = BuildStepWork(model, t, plan);
  const MemoryBreakdown copies_memory = EstimateMemory(model, t, plan, MemoryModel::kDetailed);
  t.framework.ddp_buckets = DdpBuckets::kViews;
  const StepWork views = BuildStepWork(model, t, plan);
  const MemoryBreakdown views_memory = EstimateMemory(model, t, plan, MemoryModel::kDetailed);
  REQUIRE(copies.grad_bytes == 2);
  REQUIRE(copies.micro_batches == 2);
  for (const auto& [with, without] : {std::pair{&copies.block, &views.block},
                                      {&copies.embedding, &views.embedding}, {&copies.head, &views.head}}) {
    const double P = static_cast<double>(with->params);
    CHECK(with->backward_weight.memory_bytes - without->backward_weight.memory_bytes ==
          Approx(4 * 2 * P / 2));
    CHECK(with->forward.memory_bytes == without->forward.memory_bytes);
  }
  CHECK(copies_memory.grads_bytes == Approx(2 * views_memory.grads_bytes));
  CHECK(copies_memory.total_bytes - views_memory.total_bytes == Approx(views_memory.grads_bytes));
  // Neither with ZeRO (FSDP or a sharded optimizer reduce-scatters) nor on one replica.
  for (const auto& [dp, zero] : {std::pair{4, 1}, {4, 3}, {1, 0}}) {
    INFO("dp " << dp << " zero " << zero);
    plan.dp = dp;
    plan.zero_stage = zero;
    plan.tp = 4 / dp;
    t.framework.ddp_buckets = DdpBuckets::kCopies;
    const StepWork with = BuildStepWork(model, t, plan);
    const MemoryBreakdown with_memory = EstimateMemory(model, t, plan, MemoryModel::kDetailed);
    t.framework.ddp_buckets = DdpBuckets::kViews;
    CHECK(with.block.backward_weight.memory_bytes ==
          BuildStepWork(model, t, plan).block.backward_weight.memory_bytes);
    CHECK(with_memory.total_bytes == EstimateMemory(model, t, plan, MemoryModel::kDetailed).total_bytes);
  }
}

// DeepSpeed's gradient bucket (reduce_bucket_size, 5e8 elements of the parameters' dtype):
// held through each backward by ZeRO-1/2, for the run by ZeRO-3, and every gradient copied
// into it (ZeRO-2/3 per micro-batch, ZeRO-1 once per step); a matrix larger than the bucket
// (Llama 3's 128,256 x 4,096 embedding) is reduced where it is.
TEST_CASE("reduce_bucket_elements: DeepSpeed's gradient bucket, in memory and in time",
          "[planner][framework]") {
  const ModelSpec model = LoadModel("llama3-8b");
  TrainingSpec t = Under("deepspeed", 16, 1024, Precision::kMixed);
  REQUIRE(t.framework.reduce_bucket_elements == 5e8);
  ParallelPlan plan;
  plan.dp = 8;  // 2 micro-batches per step
  for (const int zero : {1, 2, 3}) {
    INFO("zero " << zero);
    plan.zero_stage = zero;
    t.framework.reduce_bucket_elements = 5e8;
    const StepWork with = BuildStepWork(model, t, plan);
    t.framework.reduce_bucket_elements = 0;
    const StepWork without = BuildStepWork(model, t, plan);
    REQUIRE(with.param_bytes == 2);
    REQUIRE(with.micro_batches == 2);
    const double share = zero == 1 ? 0.5 : 1.0;
    CHECK(with.block.backward_weight.memory_bytes - without.block.backward_weight.memory_bytes ==
          Approx(share * 4 * static_cast<double>(with.block.params)));
    CHECK(with.embedding.params > 5e8);
    CHECK(with.embedding.backward_weight.memory_bytes == without.embedding.backward_weight.memory_bytes);
    // A bucket larger than any pending gradient: every backward holds it whole, twice with
    // ZeRO-1/2's overlapped reduction (overlap_comm's second buffer), once without it or
    // under ZeRO-3.
    for (const bool overlap : {true, false}) {
      INFO("dp_overlap " << overlap);
      plan.dp_comm_overlap = overlap;
      const double bucket = (zero <= 2 && overlap ? 2 : 1) * 8e9;
      t.framework.reduce_bucket_elements = 4e9;
      const MemoryBreakdown big = EstimateMemory(model, t, plan, MemoryModel::kDetailed);
      t.framework.reduce_bucket_elements = 0;
      const MemoryBreakdown none = EstimateMemory(model, t, plan, MemoryModel::kDetailed);
      REQUIRE(big.peak_phase != "optimizer");
      CHECK(big.comm_buffer_bytes == Approx(bucket));
      if (big.peak_phase == none.peak_phase)
        CHECK(big.total_bytes - none.total_bytes == Approx(bucket - none.comm_buffer_bytes));
      else
        CHECK(big.total_bytes > none.total_bytes);
    }
    plan.dp_comm_overlap = true;
  }
  // ZeRO-3 holds it through the optimizer's step too (a short sequence, a small bucket and
  // foreach AdamW's temporary put the peak there).
  t.seq_len = 8;
  t.framework.reduce_bucket_elements = 1e6;
  t.framework.optimizer = OptimizerStep::kForeachAdam;
  plan.dp = 2;
  plan.zero_stage = 3;
  const MemoryBreakdown step = EstimateMemory(model, t, plan, MemoryModel::kDetailed);
  REQUIRE(step.peak_phase == "optimizer");
  CHECK(step.comm_buffer_bytes == 2e6);
  // Without ZeRO there is no bucket.
  plan.zero_stage = 0;
  const MemoryBreakdown zero0 = EstimateMemory(model, t, plan, MemoryModel::kDetailed);
  CHECK(zero0.comm_buffer_bytes == 0);
}

TEST_CASE("the framework's recompute offer: the search tries it, estimate refuses the rest",
          "[planner][framework][cli]") {
  const test::CliResult refused = test::RunMeshplan(
      "estimate --model llama2-7b --cluster 8xH100 --framework megatron-lm-2021 "
      "--plan dp=8,recompute=selective");
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, Catch::Contains("recompute=selective is not offered by "
                                             "megatron-lm-2021; allowed: none, full"));
  const test::CliResult search = test::RunMeshplan(
      "search --model llama2-7b --cluster 8xH100 --framework megatron-lm-2021 --format json "
      "--top 50");
  REQUIRE(search.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(search.output);
  CHECK(j["setup"]["framework"] == "megatron-lm-2021");
  REQUIRE(!j["top"].empty());
  for (const auto& p : j["top"])
    CHECK(p["plan"].get<std::string>().find("recompute=selective") == std::string::npos);
}

TEST_CASE("estimate --framework: named in the header and the JSON, changes the prediction",
          "[planner][framework][cli]") {
  const std::string setup = "--model llama2-7b --cluster 8xH100 --plan dp=8,zero=1 ";
  const test::CliResult table = test::RunMeshplan("estimate " + setup);
  REQUIRE(table.exit_code == 0);
  CHECK_THAT(table.output, Catch::Contains("megatron-core core_r0.8.0"));  // the GPU default
  const auto json = [&](const std::string& framework) {
    const test::CliResult r =
        test::RunMeshplan("estimate --format json " + setup + "--framework " + framework);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.output);
  };
  const nlohmann::json megatron = json("megatron-core"), executor = json("meshplan");
  CHECK(megatron["setup"]["framework"] == "megatron-core");
  CHECK(executor["setup"]["framework"] == "meshplan");
  // fp32 main gradients: 2 more bytes per parameter than the executor's bf16 ones, less the
  // executor's ZeRO-1 gradient shard copy (2 bytes / 8 ranks).
  const double params = 6'738'415'616.0;
  CHECK(megatron["memory"]["breakdown"]["grads_bytes"].get<double>() -
            executor["memory"]["breakdown"]["grads_bytes"].get<double>() ==
        Approx(params * (4 - 2 - 2.0 / 8)).epsilon(1e-3));
  // A profile file by path works as a name does; a bad one exits 2 naming it.
  test::TempDir dir;
  const std::string path = dir.Write("mine.yaml", kProfile);
  CHECK(json(path)["setup"]["framework"] == path);
  const test::CliResult bad = test::RunMeshplan(
      "estimate " + setup + "--framework " + dir.Write("bad.yaml", "kernels: [1]\n"));
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("bad.yaml:1"));
  const test::CliResult empty = test::RunMeshplan("estimate " + setup + "--framework ''");
  CHECK(empty.exit_code == 2);
  CHECK_THAT(empty.output, Catch::Contains("--framework"));
}

TEST_CASE("simulate and search --framework predict for the profile they name",
          "[planner][framework][cli]") {
  // llama-1b: its replicated model states fit without offload, which torchtitan does not
  // offer with DDP.
  const std::string setup = "--model llama-1b --cluster 8xH100 --global-batch 16 --seq 2048 ";
  const test::CliResult sim =
      test::RunMeshplan("simulate " + setup + "--plan dp=8 --framework torchtitan");
  INFO(sim.output);
  REQUIRE(sim.exit_code == 0);
  CHECK_THAT(sim.output, Catch::Contains("torchtitan 9dec370ad (2024-12"));
  // The same plan under two profiles: different step times (kernels, gradient dtype).
  const auto step = [&](const char* framework) {
    const test::CliResult r = test::RunMeshplan("search --format json --top 1 " + setup +
                                                "--only dp=8,zero=0,mbs=1,recompute=none "
                                                "--framework " + std::string(framework));
    REQUIRE(r.exit_code == 0);
    const nlohmann::json j = nlohmann::json::parse(r.output);
    CHECK(j["setup"]["framework"] == framework);
    return j["top"][0]["cost"]["step_time_s"].get<double>();
  };
  CHECK(step("torchtitan") != step("megatron-core"));
}

TEST_CASE("a plan file records its framework and loads it back", "[planner][framework]") {
  PlanFile p;
  p.model = LoadModel("tiny-llama");
  p.cluster = LoadCluster("8xH100");
  p.training.global_batch = 8;
  p.training.seq_len = 128;
  p.training.framework = LoadFramework("torchtitan");
  p.plan.dp = 8;
  const std::string text = PlanFileToYaml(p);
  CHECK_THAT(text, Catch::Contains("framework: torchtitan"));
  CHECK(PlanFileFromText(text, "p.yaml") == p);
  // No framework key: the cluster's default.
  const std::string head = "model: tiny-llama\ntraining:\n  global_batch: 8\n  seq_len: 64\n";
  CHECK(PlanFileFromText(head + "cluster: 2xa40\nplan:\n  dp: 2\n", "g.yaml").training.framework.name ==
        "megatron-core");
  CHECK(PlanFileFromText(head + "cluster: cpu-1x\nplan:\n  dp: 1\n", "c.yaml").training.framework ==
        FrameworkSpec{});
}

}  // namespace
}  // namespace meshplan
