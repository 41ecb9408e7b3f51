// planner/export: each target writes what the plan sets, in the target's own names, and
// refuses (InputError naming knob, value and target) what it cannot express.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/export/export.h"
#include "planner/input_error.h"
#include "tests/planner/test_util.h"

namespace meshplan {
namespace {

using Catch::Contains;
using test::ErrorOf;

PlanFile Plan(const std::string& plan, const std::string& model = "llama3-8b",
              const std::string& cluster = "8xH100", Precision precision = Precision::kMixed) {
  PlanFile pf;
  pf.model = LoadModel(model);
  pf.cluster = LoadCluster(cluster);
  pf.training.global_batch = 64;
  pf.training.seq_len = 4096;
  pf.training.precision = precision;
  pf.plan = ParsePlanString(plan);
  return pf;
}

std::string Export(const PlanFile& pf, ExportTarget target) {
  return ExportPlan(pf, target, "plan.yaml");
}

// The refusal of `plan` by `target`: its field, and a message naming value and target.
void CheckRefused(const PlanFile& pf, ExportTarget target, const std::string& knob,
                  const std::string& value) {
  const InputError e = ErrorOf([&] { Export(pf, target); });
  CHECK(e.where().file == "plan.yaml");
  CHECK(e.field() == knob);
  CHECK_THAT(e.message(), Contains(value + " cannot be expressed in " + ToString(target)));
}

int64_t Count(const std::string& text, const std::string& what) {
  int64_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_CASE("export targets parse by name and list the allowed ones", "[planner][export]") {
  for (ExportTarget t :
       {ExportTarget::kMegatron, ExportTarget::kMegatronBridge, ExportTarget::kTorchtitan,
        ExportTarget::kDeepspeed, ExportTarget::kTorchrun}) {
    ExportTarget parsed = ExportTarget::kTorchrun;
    CHECK(ParseExportTarget(ToString(t), &parsed));
    CHECK(parsed == t);
    CHECK_THAT(AllowedExportTargets(), Contains(ToString(t)));
  }
  ExportTarget parsed;
  CHECK_FALSE(ParseExportTarget("nemo", &parsed));
}

TEST_CASE("megatron: parallel sizes, model shape, batch and precision as pretrain_gpt.py flags",
          "[planner][export][megatron]") {
  const std::string text =
      Export(Plan("dp=2,tp=2,pp=2,zero=1,sp=1,mbs=1,recompute=selective"), ExportTarget::kMegatron);
  for (const char* flag : {"--tensor-model-parallel-size 2\n",
                           "--pipeline-model-parallel-size 2\n",
                           "--sequence-parallel\n",
                           "--use-distributed-optimizer\n",
                           "--overlap-grad-reduce\n",
                           "--overlap-param-gather\n",
                           "--recompute-granularity selective\n",
                           "--num-layers 32\n",
                           "--hidden-size 4096\n",
                           "--ffn-hidden-size 14336\n",
                           "--num-attention-heads 32\n",
                           "--group-query-attention\n",
                           "--num-query-groups 8\n",
                           "--kv-channels 128\n",
                           "--swiglu\n",
                           "--normalization RMSNorm\n",
                           "--position-embedding-type rope\n",
                           "--untie-embeddings-and-output-weights\n",
                           "--micro-batch-size 1\n",
                           "--global-batch-size 64\n",
                           "--seq-length 4096\n",
                           "--bf16\n"})
    CHECK_THAT(text, Contains(std::string("  ") + flag));
  CHECK_THAT(text, Contains("MEGATRON_ARGS=(\n"));
  CHECK_THAT(text, !Contains("--context-parallel-size"));  // cp=1: Megatron's default
  CHECK_THAT(text, !Contains("=true"));                    // the bridge's spelling
}

TEST_CASE("megatron: full recompute, fp8, ZeRO-3, MoE and uneven stages",
          "[planner][export][megatron]") {
  const std::string full =
      Export(Plan("dp=8,zero=3,recompute=full", "llama3-8b", "8xH100", Precision::kFp8),
             ExportTarget::kMegatron);
  CHECK_THAT(full, Contains("--recompute-granularity full\n"));
  CHECK_THAT(full, Contains("--recompute-method uniform\n"));
  CHECK_THAT(full, Contains("--use-megatron-fsdp\n"));
  CHECK_THAT(full, Contains("--data-parallel-sharding-strategy optim_grads_params\n"));
  CHECK_THAT(full, Contains("--fp8-format hybrid\n"));
  const std::string moe = Export(Plan("dp=8,ep=8,zero=1", "mixtral-8x7b"), ExportTarget::kMegatron);
  CHECK_THAT(moe, Contains("--num-experts 8\n"));
  CHECK_THAT(moe, Contains("--moe-router-topk 2\n"));
  CHECK_THAT(moe, Contains("--expert-model-parallel-size 8\n"));
  // Llama 3.1 405B's split: 7 + 14 x 8 + 7 on pp=16.
  const std::string uneven =
      Export(Plan("dp=1,tp=8,pp=16,sp=1,first_stage_layers=7,last_stage_layers=7", "llama3.1-405b",
                  "128xH100"),
             ExportTarget::kMegatron);
  CHECK_THAT(uneven, Contains("--decoder-first-pipeline-num-layers 7\n"));
  CHECK_THAT(uneven, Contains("--decoder-last-pipeline-num-layers 7\n"));
}

TEST_CASE("megatron: an uneven interleaved split is a pipeline layout with every layer once",
          "[planner][export][megatron]") {
  const std::string text =
      Export(Plan("dp=1,tp=8,pp=16,sp=1,schedule=interleaved,vpp=2,first_stage_layers=7,"
                  "last_stage_layers=7,mbs=1",
                  "llama3.1-405b", "128xH100"),
             ExportTarget::kMegatron);
  std::smatch match;
  REQUIRE(std::regex_search(text, match, std::regex("--pipeline-model-parallel-layout '([^']*)'")));
  const std::string layout = match[1];
  CHECK(Count(layout, "t") == 126);
  CHECK(Count(layout, "|") == 16 * 2 - 1);
  CHECK(layout.front() == 'E');
  CHECK(layout.back() == 'L');
  CHECK_THAT(text, !Contains("--num-virtual-stages-per-pipeline-rank"));  // the layout says it
  CHECK_THAT(text, !Contains("--decoder-first-pipeline-num-layers"));
}

TEST_CASE("megatron and megatron-bridge refuse what Megatron-Core cannot express",
          "[planner][export][megatron]") {
  for (ExportTarget t : {ExportTarget::kMegatron, ExportTarget::kMegatronBridge}) {
    CheckRefused(Plan("dp=4,pp=2,schedule=zb_h1"), t, "schedule", "zb_h1");
    CheckRefused(Plan("dp=4,pp=2,schedule=gpipe"), t, "schedule", "gpipe");
    CheckRefused(Plan("dp=8,recompute=op"), t, "recompute", "op");
    CheckRefused(Plan("dp=8,recompute=every:2"), t, "recompute", "every:2");
    CheckRefused(Plan("dp=8,zero=1,offload_act=1"), t, "offload_act", "1");
    CheckRefused(Plan("dp=8,offload_opt=1"), t, "offload_opt", "1");
    CheckRefused(Plan("dp=4,tp=2,tp_overlap=1"), t, "tp_overlap", "1");
    CheckRefused(Plan("dp=8,zero=1", "llama3-8b", "8xH100", Precision::kBf16), t,
                 "training.precision", "bf16");
  }
  // pp=1: the schedule is not used, so it is not refused.
  CHECK_NOTHROW(Export(Plan("dp=8,schedule=zb_h1"), ExportTarget::kMegatron));
}

TEST_CASE("megatron-bridge: the same settings as ConfigContainer overrides",
          "[planner][export][megatron-bridge]") {
  const std::string text = Export(Plan("dp=2,tp=2,pp=2,zero=1,sp=1,mbs=2,recompute=full"),
                                  ExportTarget::kMegatronBridge);
  for (const char* item :
       {"model.tensor_model_parallel_size=2\n", "model.pipeline_model_parallel_size=2\n",
        "model.sequence_parallel=true\n", "model.recompute_granularity=full\n",
        "model.num_query_groups=8\n", "model.share_embeddings_and_output_weights=false\n",
        "ddp.use_distributed_optimizer=true\n", "optimizer.use_distributed_optimizer=true\n",
        "ddp.overlap_grad_reduce=true\n", "train.micro_batch_size=2\n",
        "train.global_batch_size=64\n", "dataset.sequence_length=4096\n",
        "mixed_precision=bf16_mixed\n"})
    CHECK_THAT(text, Contains(std::string("  ") + item));
  CHECK_THAT(text, Contains("BRIDGE_OVERRIDES=(\n"));
  CHECK_THAT(text, !Contains("  --"));  // no pretrain_gpt.py flag
}

TEST_CASE("megatron and megatron-bridge: an interleaved pipeline's send overlap, each in its "
          "own default's terms",
          "[planner][export][megatron][megatron-bridge]") {
  // pretrain_gpt.py overlaps by default (--no-overlap-p2p-communication turns it off);
  // ModelParallelConfig does not (overlap_p2p_comm False, batch_p2p_comm True).
  const PlanFile on = Plan("dp=2,pp=4,schedule=interleaved,vpp=2,pp_overlap=1");
  const PlanFile off = Plan("dp=2,pp=4,schedule=interleaved,vpp=2");
  const ExportTarget flags = ExportTarget::kMegatron, bridge = ExportTarget::kMegatronBridge;
  CHECK_THAT(Export(on, flags), !Contains("overlap-p2p"));
  CHECK_THAT(Export(off, flags), Contains("  --no-overlap-p2p-communication\n"));
  CHECK_THAT(Export(on, bridge), Contains("  model.overlap_p2p_comm=true\n") &&
                                     Contains("  model.batch_p2p_comm=false\n"));
  CHECK_THAT(Export(off, bridge), !Contains("p2p"));
  // Without interleaving Megatron-Core sends blocking whatever the flag: nothing to write.
  CHECK_THAT(Export(Plan("dp=2,pp=4"), flags), !Contains("p2p"));
  // torchtitan has no such setting.
  CheckRefused(Plan("dp=2,pp=4,zero=3,schedule=interleaved,vpp=2,pp_overlap=1"),
               ExportTarget::kTorchtitan, "pp_overlap", "1");
}

TEST_CASE("torchtitan: degrees, batch, schedule, checkpointing and the stages' modules",
          "[planner][export][torchtitan]") {
  const std::string text =
      Export(Plan("dp=2,tp=2,pp=2,zero=3,sp=1,mbs=2,recompute=every:2,schedule=interleaved,vpp=2"),
             ExportTarget::kTorchtitan);
  for (const char* line :
       {"data_parallel_replicate_degree = 1\n", "data_parallel_shard_degree = 2\n",
        "fsdp_reshard_after_forward = \"always\"\n", "tensor_parallel_degree = 2\n",
        "pipeline_parallel_degree = 2\n", "pipeline_parallel_schedule = \"Interleaved1F1B\"\n",
        "pipeline_parallel_microbatch_size = 2\n", "local_batch_size = 32\n",
        "global_batch_size = 64\n", "seq_len = 4096\n", "mode = \"selective\"\n",
        "selective_ac_option = \"2\"\n", "mixed_precision_param = \"bfloat16\"\n"})
    CHECK_THAT(text, Contains(line));
  // 4 model parts (pp x vpp), each of the 32 layers exactly once, in order.
  CHECK(Count(text, "  [\"") == 4);
  for (int i = 0; i < 32; ++i) CHECK(Count(text, "\"layers." + std::to_string(i) + "\"") == 1);
  CHECK(text.find("\"layers.31\"") < text.find("\"output\""));
  CHECK(text.find("\"tok_embeddings\"") < text.find("\"layers.0\""));
  // Without pp the local batch is the micro-batch.
  CHECK_THAT(Export(Plan("dp=8,zero=3,mbs=2,recompute=full"), ExportTarget::kTorchtitan),
             Contains("local_batch_size = 2\n"));
}

TEST_CASE("torchtitan refuses what it cannot express", "[planner][export][torchtitan]") {
  const ExportTarget t = ExportTarget::kTorchtitan;
  CheckRefused(Plan("dp=4,pp=2,zero=3,schedule=zb_h1"), t, "schedule", "zb_h1");
  CheckRefused(Plan("dp=8,zero=3,recompute=selective"), t, "recompute", "selective");
  CheckRefused(Plan("dp=8,zero=1"), t, "zero", "1");
  CheckRefused(Plan("dp=4,tp=2,zero=3"), t, "sp", "0");
  CheckRefused(Plan("dp=4,tp=2,sp=1"), t, "zero", "0");  // DDP only alone
  CHECK_THAT(Export(Plan("dp=8"), t), Contains("data_parallel_replicate_degree = 8\n"));
  CheckRefused(Plan("dp=8,zero=3,offload_opt=1"), t, "offload_opt", "1");
  CheckRefused(Plan("dp=8,zero=3,dp_overlap=0"), t, "dp_overlap", "0");
  CHECK_THAT(Export(Plan("dp=8,zero=3,offload_opt=1,offload_params=1"), t),
             Contains("enable_cpu_offload = true\n"));
}

TEST_CASE("deepspeed: ds_config.json with ZeRO, offload, batch and bf16",
          "[planner][export][deepspeed]") {
  const nlohmann::json config = nlohmann::json::parse(
      Export(Plan("dp=8,zero=3,mbs=2,offload_opt=1,offload_params=1,recompute=full"),
             ExportTarget::kDeepspeed));
  CHECK(config["train_batch_size"] == 64);
  CHECK(config["train_micro_batch_size_per_gpu"] == 2);
  CHECK(config["gradient_accumulation_steps"] == 4);  // 64 / (8 x 2)
  CHECK(config["bf16"]["enabled"] == true);
  CHECK(config["zero_optimization"]["stage"] == 3);
  CHECK(config["zero_optimization"]["offload_optimizer"]["device"] == "cpu");
  CHECK(config["zero_optimization"]["offload_param"]["device"] == "cpu");
  CHECK(config.contains("activation_checkpointing"));
  // The gradient bucket the prediction counts: none under the plan's default profile, the
  // deepspeed profile's reduce_bucket_size under it.
  CHECK(config["zero_optimization"]["contiguous_gradients"] == false);
  CHECK_FALSE(config["zero_optimization"].contains("reduce_bucket_size"));
  PlanFile searched = Plan("dp=8,zero=2");
  searched.training.framework = LoadFramework("deepspeed");
  const nlohmann::json bucket = nlohmann::json::parse(Export(searched, ExportTarget::kDeepspeed));
  CHECK(bucket["zero_optimization"]["contiguous_gradients"] == true);
  CHECK(bucket["zero_optimization"]["reduce_bucket_size"] == 500000000);
  const ExportTarget t = ExportTarget::kDeepspeed;
  CheckRefused(Plan("dp=4,tp=2,sp=1"), t, "tp", "2");
  CheckRefused(Plan("dp=4,pp=2"), t, "pp", "2");
  CheckRefused(Plan("dp=8,recompute=selective"), t, "recompute", "selective");
  CheckRefused(Plan("dp=8,zero=1", "llama3-8b", "8xH100", Precision::kFp8), t, "training.precision",
               "fp8");
}

TEST_CASE("torchrun: the launch line and an sbatch script for meshplan run",
          "[planner][export][torchrun]") {
  const std::string one = Export(Plan("dp=2,tp=4,sp=1,zero=1"), ExportTarget::kTorchrun);
  CHECK_THAT(one, Contains("torchrun --standalone --nproc-per-node 8 --no-python meshplan run "
                           "plan.yaml --out measured.json"));
  CHECK_THAT(one, Contains("#SBATCH --nodes=1\n"));
  CHECK_THAT(one, Contains("srun --cpu-bind=cores meshplan run plan.yaml"));
  const std::string two =
      Export(Plan("dp=4,tp=4,sp=1,zero=1", "llama3-8b", "16xH100"), ExportTarget::kTorchrun);
  CHECK_THAT(two, Contains("--nnodes 2 --rdzv-backend c10d"));
  CHECK_THAT(two, Contains("#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=8\n"));
  // What meshplan run refuses, export refuses with the executor's reason.
  const InputError e =
      ErrorOf([] { Export(Plan("dp=4,tp=2,sp=1,tp_overlap=1"), ExportTarget::kTorchrun); });
  CHECK_THAT(e.message(), Contains("cannot be expressed in torchrun"));
  CHECK_THAT(e.message(), Contains("tp_overlap=1"));
}

TEST_CASE("export: a run's fused loss is Megatron-Core's --cross-entropy-loss-fusion",
          "[planner][export][megatron]") {
  PlanFile pf = Plan("dp=8");
  CHECK(Export(pf, ExportTarget::kMegatron).find("cross-entropy-loss-fusion") == std::string::npos);
  pf.training.framework.loss = LossKernel::kFp32Fused;
  CHECK_THAT(Export(pf, ExportTarget::kMegatron), Contains("--cross-entropy-loss-fusion"));
  CHECK_THAT(Export(pf, ExportTarget::kMegatronBridge), Contains("cross_entropy_loss_fusion"));
}

}  // namespace
}  // namespace meshplan
