// The published runs (configs/validation/published_runs.yaml, docs/validation/) and their
// prediction (planner/validate/): the file holds every row of both papers as published, the
// paper's own formulas reproduce the paper's own numbers, and the detailed memory model
// reproduces Korthikanti et al.'s activation memory. Step-time accuracy is reported by
// `meshplan validate`, not asserted: these rows check the physics, they do not tune it.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/cost/flops.h"
#include "planner/cost/memory_model.h"
#include "planner/cost/param_count.h"
#include "planner/units_format.h"
#include "planner/input_error.h"
#include "planner/parallel_plan.h"
#include "planner/validate/published_runs.h"
#include "planner/validate/validation.h"
#include "tests/planner/test_util.h"

namespace meshplan {
namespace {

using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

const PublishedRuns& Runs() {
  static const PublishedRuns runs = LoadPublishedRuns(
      std::string(MESHPLAN_SOURCE_DIR) + "/configs/validation/published_runs.yaml");
  return runs;
}

const PublishedTable& Table(const std::string& id) {
  for (const PublishedTable& t : Runs().tables)
    if (t.id == id) return t;
  FAIL("no table " << id);
  throw;
}

const PublishedRow& Row(const std::string& table, const std::string& name) {
  for (const PublishedRow& r : Table(table).rows)
    if (r.name == name) return r;
  FAIL("no row " << name << " in " << table);
  throw;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The tables of the two Megatron-LM papers (GPT on A100, 2021-2022 software).
bool IsMegatronPaper(const PublishedTable& t) {
  return t.id.starts_with("narayanan2021") || t.id.starts_with("korthikanti2022");
}

TEST_CASE("the published runs file holds every row of both papers", "[planner][validation]") {
  REQUIRE(Runs().tables.size() == 6);
  CHECK(Table("narayanan2021-table1").rows.size() == 10);   // GPT 1.7B .. 1T
  CHECK(Table("korthikanti2022-table5").rows.size() == 8);  // 4 models x (full, seq+selective)
  CHECK(Table("korthikanti2022-figure1").rows.size() == 8); // 4 models x (none, seq+selective)
  CHECK(Table("narayanan2021-table1").figure == PublishedFigure::kTflopsPerGpu);
  CHECK(Table("korthikanti2022-table5").figure == PublishedFigure::kStepTime);
  CHECK(Table("korthikanti2022-figure1").figure == PublishedFigure::kActivationMemory);
  CHECK(Table("narayanan2021-table1").framework == "megatron-lm-2021");
  CHECK(Table("korthikanti2022-table5").framework == "megatron-lm-2022");
  CHECK(Table("korthikanti2022-figure1").framework == "megatron-lm-2022");
  for (const PublishedTable& t : Runs().tables) {
    if (!IsMegatronPaper(t)) continue;
    for (const PublishedRow& r : t.rows) {
      CAPTURE(t.id, r.name);
      const PlanFile& s = r.setup;
      // GPT block, vocabulary 51,200, sequence 2048, tied embeddings, F = 4h, MHA.
      CHECK(s.model.block == BlockKind::kGpt);
      CHECK(s.model.vocab_size == 51200);
      CHECK(s.model.tied_embeddings);
      CHECK(s.model.ffn_hidden == 4 * s.model.hidden);
      CHECK(s.model.kv_heads == s.model.heads);
      CHECK(s.training.seq_len == 2048);
      CHECK(s.training.precision == Precision::kMixed);
      // Megatron-LM 2021 summed micro-batch gradients with a separate add; the 2022 code in
      // the wgrad GEMM (docs/validation/README.md).
      CHECK(s.training.framework.grad_accumulation == (t.id == "narayanan2021-table1"
                                                 ? GradAccumulation::kSeparate
                                                 : GradAccumulation::kFused));
      // The 2021 pipelined rows ran the local DDP, which all-reduces after the backward.
      CHECK(s.plan.dp_comm_overlap == !(t.id == "narayanan2021-table1" && s.plan.pp > 1));
      // A100 80GB SXM in DGX nodes of 8, NVLink3 inside, HDR InfiniBand between.
      CHECK(s.cluster.gpu.name == "a100-80gb");
      CHECK(s.cluster.gpus_per_node == 8);
      CHECK(s.cluster.gpu.peak_flops_bf16 == 312e12);
      CHECK(s.cluster.world_size() == s.plan.world_size());
      CHECK(s.plan.tp <= 8);
      CHECK(r.framework == t.framework);
      CHECK_FALSE(r.skipped());
      // Figure 1: without recompute, state + activations exceed 80 GB (never run).
      CHECK(r.fits == (r.name.find("no recompute") == std::string::npos));
      REQUIRE(r.published.has_value());
      CHECK(*r.published > 0);
    }
  }
  // Spot checks against the papers.
  const PublishedRow& n1 = Row("narayanan2021-table1", "1008.0B");
  CHECK(n1.published == 163);
  CHECK(n1.setup.cluster.world_size() == 3072);
  CHECK(n1.setup.training.global_batch == 3072);
  CHECK(n1.setup.plan.pp == 64);
  CHECK(Row("narayanan2021-table1", "1.7B").published == 137);
  CHECK(Row("korthikanti2022-table5", "175B full recompute").published == 18.13);
  CHECK(Row("korthikanti2022-table5", "1T seq+selective").published == 71.49);
  CHECK(Row("korthikanti2022-figure1", "530B no recompute").published == 114.02);
}

TEST_CASE("the model shapes have the parameter counts Narayanan et al. publish",
          "[planner][validation]") {
  // Table 1 prints the count to one decimal (1.65e9 -> "1.7"): within half a unit of it.
  for (const PublishedRow& r : Table("narayanan2021-table1").rows) {
    CAPTURE(r.name);
    CHECK_THAT(double(CountParams(r.setup.model)) / 1e9, WithinAbs(r.params_billion, 0.05));
  }
}

TEST_CASE("Narayanan et al.'s FLOP formula, by hand for the 1.7B row", "[planner][validation]") {
  const PublishedRow& r = Row("narayanan2021-table1", "1.7B");
  // 96*B*s*l*h^2*(1 + s/(6h) + V/(16*l*h)), B = 512, s = 2048, l = 24, h = 2304, V = 51200:
  // 96 * 512 * 2048 * 24 * 2304^2 = 1.2837e16; 1 + 2048/13824 + 51200/884736 = 1.20602.
  const double by_hand = 96.0 * 512 * 2048 * 24 * 2304.0 * 2304.0 *
                         (1 + 2048.0 / 13824.0 + 51200.0 / 884736.0);
  CHECK_THAT(MegatronFlopsPerIteration(r.setup.model, r.setup.training), WithinRel(by_hand, 1e-14));
  CHECK_THAT(by_hand, WithinRel(1.54668300679e16, 1e-10));
  // It is the cost model's hardware FLOPs under full recompute with the blocks' norms and
  // biases neglected (docs/cost_model.md section 4): the two agree to a fraction of a percent.
  for (const PublishedRow& row : Table("narayanan2021-table1").rows) {
    CAPTURE(row.name);
    CHECK_THAT(StepFlopsOf(row.setup.model, row.setup.training, Recompute::kFull).hardware,
               WithinRel(MegatronFlopsPerIteration(row.setup.model, row.setup.training), 0.002));
  }
}

TEST_CASE("Korthikanti et al.'s MFU follows from their time per iteration",
          "[planner][validation]") {
  // Table 5's MFU (sequence parallel + selective recompute) = model FLOPs (no recompute)
  // / (GPUs * 312 TFLOP/s * time): checks the transcribed times against the paper's own ratio.
  const std::pair<const char*, double> mfu[] = {{"22B seq+selective", 0.415},
                                                {"175B seq+selective", 0.514},
                                                {"530B seq+selective", 0.560},
                                                {"1T seq+selective", 0.563}};
  for (const auto& [name, published_mfu] : mfu) {
    CAPTURE(name);
    const PublishedRow& r = Row("korthikanti2022-table5", name);
    const double model_flops = StepFlopsOf(r.setup.model, r.setup.training, Recompute::kNone).model;
    const double gpus = double(r.setup.cluster.world_size());
    CHECK_THAT(model_flops / (gpus * 312e12 * *r.published), WithinAbs(published_mfu, 0.003));
  }
}

// Korthikanti et al. 2022, section 4: bytes per layer (MegatronActivationBytesPerLayer) times
// the layers the first stage holds: L with 1F1B (p micro-batches of L/p layers), and
// L * (1 + (p-1)/(p*v)) with the interleaved schedule.
double ClosedFormFirstStageBytes(const PlanFile& s) {
  const ParallelPlan& p = s.plan;
  const double per_layer = MegatronActivationBytesPerLayer(
      s.training.seq_len, p.micro_batch, s.model.hidden, s.model.heads, p.tp,
      p.sequence_parallel, p.recompute.kind);
  const double interleave =
      p.schedule == PipelineSchedule::kInterleaved
          ? 1.0 + double(p.pp - 1) / double(p.pp * p.virtual_stages)
          : 1.0;
  return per_layer * double(s.model.layers) * interleave;
}

TEST_CASE("Figure 1 is Korthikanti et al.'s closed form, with 3 virtual stages for 175B and 530B",
          "[planner][validation][memory]") {
  // The published bars are the closed form to 4 digits; that is how the rows' unpublished
  // choices were derived (docs/validation/korthikanti2022.md): "no recompute" is tensor
  // parallel without sequence parallel; 175B and 530B interleave v = 3 chunks; 1T runs 1F1B.
  for (const PublishedRow& r : Table("korthikanti2022-figure1").rows) {
    CAPTURE(r.name);
    CHECK_THAT(ClosedFormFirstStageBytes(r.setup) / kGiB, WithinRel(*r.published, 0.001));
  }
}

TEST_CASE("the detailed memory model reproduces Figure 1 within 3%",
          "[planner][validation][memory]") {
  // What the detailed model adds to the closed form: fp32 LayerNorm statistics and stage 0's
  // token ids and embedding-dropout mask per micro-batch in flight (up to +2.4%, 1T, 64 in
  // flight); what it takes away: the tensors already freed at the stage's peak phase (the
  // last layer's MLP half during its attention backward, the head's inputs; 22B, -1.2%).
  const PublishedTable& table = Table("korthikanti2022-figure1");
  const ValidatedTable v = PredictPublishedTable(table);
  REQUIRE(v.rows.size() == table.rows.size());
  for (const ValidatedRow& r : v.rows) {
    CAPTURE(r.name, r.predicted, r.published);
    CHECK(std::abs(r.error_pct) < 3.0);
    CHECK(r.predicted == r.first_stage_activations_bytes / kGiB);
  }
  CHECK(v.mape_pct < 3.0);
}

TEST_CASE("predictions use Estimate(): TFLOP/s is the paper's FLOPs over its step time",
          "[planner][validation]") {
  const PublishedRow& r = Row("narayanan2021-table1", "145.6B");
  const ValidatedRow v = PredictPublishedRow(r, PublishedFigure::kTflopsPerGpu);
  CHECK(v.gpus == 1536);
  CHECK(v.cost.time.total_s > 0);
  CHECK_THAT(v.predicted, WithinRel(MegatronFlopsPerIteration(r.setup.model, r.setup.training) /
                                        (v.cost.time.total_s * 1536) / 1e12,
                                    1e-14));
  CHECK(v.error_pct == Approx((v.predicted - 148) / 148 * 100));
  // The time rows predict Estimate()'s step time itself.
  const PublishedRow& k = Row("korthikanti2022-table5", "22B full recompute");
  const ValidatedRow t = PredictPublishedRow(k, PublishedFigure::kStepTime);
  CHECK(t.predicted == t.cost.time.total_s);
  // A table's MAPE is the mean |error| and its worst row the largest.
  const ValidatedTable table = PredictPublishedTable(Table("korthikanti2022-table5"));
  double sum = 0, worst = 0;
  for (const ValidatedRow& row : table.rows) {
    sum += std::abs(row.error_pct);
    worst = std::max(worst, std::abs(row.error_pct));
  }
  CHECK(table.mape_pct == Approx(sum / 8));
  CHECK(table.max_abs_error_pct == worst);
}

TEST_CASE("predicted under another profile, a row keeps its run's own settings",
          "[planner][validation]") {
  // torchtitan's Llama 3 8B rows ran norm_type = "fused_rmsnorm" (the row's `norm: fused`),
  // its 70B rows the profile's rmsnorm; the table's grad_accumulation is the run's too.
  PublishedRuns runs = Runs();
  std::erase_if(runs.tables, [](const PublishedTable& t) { return t.id != "torchtitan2024-a100-fsdp2"; });
  const FrameworkSpec other = LoadFramework("megatron-core");  // fused kernels, fused accumulation
  REQUIRE(other.grad_accumulation == GradAccumulation::kFused);
  PredictUnder(other, &runs);
  const std::vector<PublishedRow>& rows = runs.tables.at(0).rows;
  for (const PublishedRow& row : rows) {
    CAPTURE(row.name);
    const FrameworkSpec& f = row.setup.training.framework;
    CHECK(f.name == "megatron-core");
    CHECK(f.grad_accumulation == GradAccumulation::kSeparate);  // the table's common setting
    CHECK(f.fused_norm == (row.name.find("70B") == std::string::npos));
  }
}

TEST_CASE("torchtitan's December 2024 H100 rows: its own version, the HBM2e H100, and the "
          "memory it reported", "[planner][validation]") {
  const PublishedTable& t = Table("torchtitan2024-h100-fsdp");
  CHECK(t.framework == "torchtitan");
  CHECK(t.figure == PublishedFigure::kTokensPerGpu);
  REQUIRE(t.rows.size() == 6);  // FSDP, + torch.compile, + Float8 on 8 and on 128 GPUs
  const ValidatedTable v = PredictPublishedTable(t);
  REQUIRE(v.rows.size() == 2);  // the eager rows; the compiled ones are listed, not predicted
  CHECK(v.skipped.size() == 4);
  // The memory its log reported ("Memory(GiB)": torch.cuda.max_memory_reserved) beside the
  // predicted total: 82.4 GiB on 8 GPUs, 67.0 on 128. Within 10% only with the loss as that
  // version runs it (cross-entropy-fp32-freed; April 2024's held fp32 logits add 9 GiB).
  const std::pair<const char*, double> reported[] = {{"8 GPUs FSDP", 82.4}, {"128 GPUs FSDP", 67.0}};
  for (const auto& [name, gib] : reported) {
    const ValidatedRow* row = nullptr;
    for (const ValidatedRow& r : v.rows)
      if (r.name == name) row = &r;
    REQUIRE(row != nullptr);
    CAPTURE(name);
    CHECK(row->cost.fits);
    CHECK(ToGiB(row->cost.memory.total_bytes) == Approx(gib).epsilon(0.10));
    CHECK(row->gpu == "h100-sxm-96gb");
  }
}

TEST_CASE("NeMo 24.07's DGX-H100 table and torchtitan's A100 rows, as published",
          "[planner][validation]") {
  const PublishedTable& nemo = Table("nemo2407-dgxh100-fp8");
  const PublishedTable& titan = Table("torchtitan2024-a100-fsdp2");
  CHECK(nemo.figure == PublishedFigure::kTokensPerGpu);
  CHECK(titan.figure == PublishedFigure::kTokensPerGpu);
  CHECK(nemo.framework == "nemo");
  CHECK(titan.framework == "torchtitan-2024-04");  // the version that ran them
  REQUIRE(nemo.rows.size() == 12);  // every row of the table, Nemotron's included
  REQUIRE(titan.rows.size() == 10);  // 8 published rows and the 2 out-of-memory ones
  for (const PublishedTable* t : {&nemo, &titan}) {
    for (const PublishedRow& r : t->rows) {
      CAPTURE(t->id, r.name, r.skip_reason);
      CHECK(r.framework == t->framework);
      if (r.skipped()) continue;  // only name, figure, fits, plan text and reason are read
      const PlanFile& s = r.setup;
      CHECK(s.cluster.world_size() == s.plan.world_size());
      CHECK(s.cluster.gpus_per_node == 8);
      CHECK(ToShortPlanString(s.plan).size() > 0);
      if (t == &nemo) {
        // DGX-H100, FP8, the distributed optimizer over dp x cp, no recompute.
        CHECK(s.cluster.gpu.name == "h100-sxm");
        CHECK(s.training.precision == Precision::kFp8);
        CHECK(s.plan.zero_stage == 1);
        // No recompute but in Nemotron-340B's recipe (activations_checkpoint_granularity).
        CHECK(s.plan.recompute == (r.name == "Nemotron-340B" ? Recompute::kSelective
                                                             : Recompute::kNone));
        CHECK(s.plan.sequence_parallel == (s.plan.tp > 1));
      } else {
        // FSDP2 over all 64 A100s, bf16 compute over fp32 parameters, the local batch as
        // the one micro-batch of a step.
        CHECK(s.cluster.gpu.name == "a100-80gb");
        CHECK(s.training.precision == Precision::kMixed);
        CHECK(s.plan.zero_stage == 3);
        CHECK(s.plan.dp == 64);
        CHECK(s.training.global_batch == 64 * s.plan.micro_batch);
      }
    }
  }
  // Spot checks against the sources.
  CHECK(Row("nemo2407-dgxh100-fp8", "GPT3-5B").published == 22521);
  CHECK(Row("nemo2407-dgxh100-fp8", "LLAMA3-70B CP2").published == 1533);
  CHECK(Row("nemo2407-dgxh100-fp8", "LLAMA3-8B CP2").setup.plan.cp == 2);
  CHECK(Row("nemo2407-dgxh100-fp8", "GPT3-175B 512 GPUs").setup.plan.virtual_stages == 6);
  for (const char* name : {"Nemotron-8B", "Nemotron-22B", "Nemotron-340B"})
    CHECK_FALSE(Row("nemo2407-dgxh100-fp8", name).skipped());  // squared-ReLU FFNs
  CHECK(Row("torchtitan2024-a100-fsdp2", "Llama 2 13B none").published == 2162);
  CHECK(Row("torchtitan2024-a100-fsdp2", "Llama 3 70B full").setup.plan.recompute ==
        Recompute::kFull);
  // Each run's norm_type (train_configs/*.toml): fused_rmsnorm for 8B and 13B, rmsnorm for 70B.
  for (const PublishedRow& r : titan.rows) {
    CAPTURE(r.name);
    CHECK(r.setup.training.framework.kernels == KernelSet::kTorchtitan2024);
    CHECK(r.setup.training.framework.fused_norm == (r.name.find("70B") == std::string::npos));
  }
  int selective_rows = 0, out_of_memory = 0;
  for (const PublishedRow& r : titan.rows) {
    CAPTURE(r.name);
    if (!r.fits) {
      ++out_of_memory;
      CHECK(r.name.starts_with("Llama 2 70B selective"));
      CHECK(r.name.ends_with("local batch 2"));
      CHECK_FALSE(r.published.has_value());  // it never ran, so it published no figure
    }
    // torchtitan's selective checkpointing: recompute=op and every:2, predicted like the rest.
    CHECK_FALSE(r.skipped());
    if (r.name.find("selective") != std::string::npos) {
      ++selective_rows;
      const bool op = r.name.find("selective op") != std::string::npos;
      CHECK(r.setup.plan.recompute ==
            (op ? RecomputePolicy(Recompute::kOp) : RecomputePolicy::Every(2)));
    }
  }
  CHECK(selective_rows == 7);
  CHECK(out_of_memory == 2);
}

TEST_CASE("the new tables' models are the published architectures", "[planner][validation]") {
  // NeMo's GPT3 recipes: 4h MLP, 2,048 learned positions, GPT-2 BPE's 50,257 tokens padded
  // to a multiple of 128 * TP (make_vocab_size_divisible_by); the names are the parameters.
  const std::pair<const char*, double> gpt3[] = {{"GPT3-5B", 5e9},
                                                 {"GPT3-20B", 20e9},
                                                 {"GPT3-175B 128 GPUs", 175e9},
                                                 {"GPT3-175B 512 GPUs", 175e9}};
  for (const auto& [name, params] : gpt3) {
    CAPTURE(name);
    const PublishedRow& r = Row("nemo2407-dgxh100-fp8", name);
    const ModelSpec& m = r.setup.model;
    CHECK(m.block == BlockKind::kGpt);
    const int64_t multiple = 128 * r.setup.plan.tp;
    CHECK(m.vocab_size % multiple == 0);
    CHECK(m.vocab_size - 50257 < multiple);
    CHECK(m.vocab_size >= 50257);
    CHECK(m.max_seq == 2048);
    CHECK(m.ffn_hidden == 4 * m.hidden);
    CHECK_THAT(double(CountParams(m)), WithinRel(params, 0.02));
  }
  // The llama rows read configs/models: Touvron et al. 2023 and Meta's Llama 3 config.json
  // (NeMo-Framework-Launcher 24.07's llama recipes and torchtitan's flavors agree).
  struct Shape {
    const char* row;
    int64_t hidden, layers, heads, kv_heads, ffn, vocab;
  };
  const Shape shapes[] = {{"LLAMA2-7B", 4096, 32, 32, 32, 11008, 32000},
                          {"LLAMA2-13B", 5120, 40, 40, 40, 13824, 32000},
                          {"LLAMA2-70B", 8192, 80, 64, 8, 28672, 32000},
                          {"LLAMA3-8B CP2", 4096, 32, 32, 8, 14336, 128256},
                          {"LLAMA3-70B CP2", 8192, 80, 64, 8, 28672, 128256}};
  // An untied llama-style block of shape `s`.
  auto check_shape = [](const ModelSpec& m, const Shape& s) {
    CHECK(m.block == BlockKind::kLlama);
    CHECK_FALSE(m.tied_embeddings);
    CHECK(m.hidden == s.hidden);
    CHECK(m.layers == s.layers);
    CHECK(m.heads == s.heads);
    CHECK(m.kv_heads == s.kv_heads);
    CHECK(m.ffn_hidden == s.ffn);
    CHECK(m.vocab_size == s.vocab);
  };
  for (const Shape& s : shapes) {
    CAPTURE(s.row);
    const ModelSpec& m = Row("nemo2407-dgxh100-fp8", s.row).setup.model;
    check_shape(m, s);
    CHECK(m.gated_ffn());
  }
  // The Nemotron rows (NeMo-Framework-Launcher 24.07 nemotron/*.yaml, the Nemotron-4 340B
  // report's Table 1): llama-style blocks with a squared-ReLU FFN of 4h, 256,000 tokens,
  // untied; the names are the parameters.
  const std::pair<Shape, double> nemotron[] = {
      {{"Nemotron-8B", 4096, 32, 32, 32, 16384, 256000}, 8e9},
      {{"Nemotron-22B", 6144, 40, 48, 48, 24576, 256000}, 22e9},
      {{"Nemotron-340B", 18432, 96, 96, 8, 73728, 256000}, 340e9}};
  for (const auto& [s, params] : nemotron) {
    CAPTURE(s.row);
    const PlanFile& setup = Row("nemo2407-dgxh100-fp8", s.row).setup;
    // nemotron_340b.yaml alone sets optim.dtype: bf16; the other recipes keep NeMo's fp32.
    CHECK(setup.training.framework.fp8_states ==
          (s.row == std::string("Nemotron-340B") ? Fp8StateDtype::kBf16 : Fp8StateDtype::kFp32));
    // nemotron_8b.yaml and nemotron_22b.yaml set cross_entropy_loss_fusion: true.
    CHECK(setup.training.framework.loss == (s.row == std::string("Nemotron-340B")
                                                ? LossKernel::kFp32InPlace
                                                : LossKernel::kFp32Fused));
    const ModelSpec& m = setup.model;
    check_shape(m, s);
    CHECK(m.ffn_activation == FfnActivation::kSquaredRelu);
    CHECK_THAT(double(CountParams(m)), WithinRel(params, 0.07));
  }
}

TEST_CASE("torchtitan's MFU follows from its WPS", "[planner][validation]") {
  // torchtitan's train.py and utils.py (April 2024): MFU = (6 * N + 12 * l * h * q * t) * WPS
  // / 312 TFLOP/s on an A100, N every parameter of the model, l layers, h heads, q head dim,
  // t sequence. Checks the transcribed WPS against the page's own MFU (printed to 0.1%).
  struct Published {
    const char* row;
    const char* model;
    double seq;
    double mfu;
  };
  const Published rows[] = {{"Llama 3 8B selective layer", "llama3-8b", 8192, 0.568},
                            {"Llama 3 8B selective op", "llama3-8b", 8192, 0.582},
                            {"Llama 3 70B full", "llama3-70b", 8192, 0.517},
                            {"Llama 2 13B none", "llama2-13b", 4096, 0.611},
                            {"Llama 2 13B selective layer", "llama2-13b", 4096, 0.541},
                            {"Llama 2 13B selective op", "llama2-13b", 4096, 0.538},
                            {"Llama 2 70B selective op", "llama2-70b", 4096, 0.508},
                            {"Llama 2 70B full", "llama2-70b", 4096, 0.505}};
  for (const Published& p : rows) {
    CAPTURE(p.row);
    const PublishedRow& r = Row("torchtitan2024-a100-fsdp2", p.row);
    const ModelSpec m = LoadModel(p.model);
    const double per_token = 6.0 * double(CountParams(m)) +
                             12.0 * double(m.layers * m.heads * m.head_dim()) * p.seq;
    REQUIRE(r.published.has_value());
    CHECK_THAT(per_token * *r.published / 312e12, WithinAbs(p.mfu, 0.0006));
  }
}

TEST_CASE("tokens/s per GPU is Estimate()'s throughput over the GPUs, every row has a fit",
          "[planner][validation]") {
  const PublishedRow& r = Row("nemo2407-dgxh100-fp8", "LLAMA2-7B");
  const ValidatedRow v = PredictPublishedRow(r, PublishedFigure::kTokensPerGpu);
  CHECK(v.framework == "nemo");
  CHECK(v.gpus == 8);
  // 128 sequences of 4,096 tokens over the step time and 8 GPUs.
  CHECK_THAT(v.predicted, WithinRel(128.0 * 4096 / v.cost.time.total_s / 8, 1e-12));
  CHECK(v.error_pct == Approx((v.predicted - 16847) / 16847 * 100));
  CHECK(v.fit_disagrees() == !v.cost.fits);  // the run fitted
  // The MAPE is over the rows with a figure: the two runs that ran out of memory have none.
  const ValidatedTable t = PredictPublishedTable(Table("torchtitan2024-a100-fsdp2"));
  CHECK(t.rows.size() == 10);
  CHECK(t.skipped.empty());
  CHECK(t.figure_rows == 8);
  double sum = 0;
  int64_t disagreements = 0;
  for (const ValidatedRow& row : t.rows) {
    sum += std::abs(row.error_pct);  // 0 for a row without a figure
    disagreements += row.fit_disagrees();
  }
  CHECK(t.mape_pct == Approx(sum / 8));
  CHECK(t.fit_disagreements == disagreements);
  const std::string text = FormatValidationTable({"", {t}});
  CHECK(text.find("framework: torchtitan") != std::string::npos);
  // Skipped rows are listed with their reason, not predicted (torch.compile's rows).
  const ValidatedTable h100 = PredictPublishedTable(Table("torchtitan2024-h100-fsdp"));
  REQUIRE_FALSE(h100.skipped.empty());
  CHECK(FormatValidationTable({"", {h100}}).find("skipped: " + h100.skipped.front().name + " (") !=
        std::string::npos);
}

// A runs file of one table, `rows` under a valid heading; `table_keys` replace its defaults.
std::string OneTable(const std::string& rows, const std::string& table_keys =
                                                  "    framework: megatron-core\n"
                                                  "    figure: tokens_per_s_per_gpu\n") {
  return "tables:\n"
         "  - id: t\n"
         "    paper: p\n"
         "    source: s\n"
         "    page: x.md\n" +
         table_keys +
         "    common: {gpu: h100-sxm, precision: bf16, seq_len: 2048}\n"
         "    rows:\n" +
         rows;
}

TEST_CASE("a fit the publication contradicts is reported", "[planner][validation]") {
  test::TempDir dir;
  // A 1.2B llama on one H100 fits easily; the row claims the run ran out of memory.
  const std::string path = dir.Write(
      "oom.yaml",
      OneTable("      - {name: tiny, block: llama, vocab_size: 32000, heads: 16, hidden: 2048,\n"
               "         layers: 20, ffn_hidden: 5632, tied_embeddings: false, gpus: 1,\n"
               "         global_batch: 8, plan: \"dp=1,mbs=1\", fits: false}\n"));
  const PublishedRuns runs = LoadPublishedRuns(path);
  REQUIRE(runs.tables[0].rows.size() == 1);
  CHECK_FALSE(runs.tables[0].rows[0].published.has_value());
  const ValidationReport report = PredictPublishedRuns(runs);
  const ValidatedTable& t = report.tables[0];
  REQUIRE(t.rows.size() == 1);
  CHECK(t.rows[0].cost.fits);
  CHECK(t.rows[0].fit_disagrees());
  CHECK(t.fit_disagreements == 1);
  CHECK(t.figure_rows == 0);
  const std::string text = FormatValidationTable(report);
  CHECK(text.find("<- the run ran out of memory") != std::string::npos);
  // It says by how much: the predicted total against the usable memory, and the allocator's
  // share of the prediction.
  const MemoryBreakdown& m = t.rows[0].cost.memory;
  CHECK(text.find(fmt::format("(predicted {:.2f} of {:.2f} GiB, {:.2f} of them the allocator's "
                              "assumed fragmentation)",
                              ToGiB(m.total_bytes), ToGiB(t.rows[0].cost.usable_bytes),
                              ToGiB(m.allocator_overhead_bytes))) != std::string::npos);
  CHECK(m.allocator_overhead_bytes > 0);
  CHECK(text.find("fit: as published in 0 of 1 rows; predicted otherwise in 1 (tiny)\n") !=
        std::string::npos);
  CHECK(text.find("MAPE") == std::string::npos);  // no figure, no MAPE
  CHECK(ValidationToJson(report)["tables"][0]["rows"][0]["published"].is_null());
}

TEST_CASE("a row over the GPU only by the allocator's assumed fragmentation is tight, not a "
          "disagreement", "[planner][validation]") {
  test::TempDir dir;
  PublishedRuns runs = LoadPublishedRuns(dir.Write(
      "tight.yaml",
      OneTable("      - {name: tiny, block: llama, vocab_size: 32000, heads: 16, hidden: 2048,\n"
               "         layers: 20, ffn_hidden: 5632, tied_embeddings: false, gpus: 1,\n"
               "         global_batch: 8, plan: \"dp=1,mbs=1\", published: 1000}\n")));
  const MemoryBreakdown m = PredictPublishedRuns(runs).tables[0].rows[0].cost.memory;
  REQUIRE(m.allocator_overhead_bytes > 0);
  // A GPU between the tensors' total and the total with the assumed fragmentation.
  PublishedRow& row = runs.tables[0].rows[0];
  row.setup.cluster.gpu.memory_bytes =
      static_cast<int64_t>(m.total_bytes - m.allocator_overhead_bytes / 2);
  for (bool published_fits : {true, false}) {
    row.fits = published_fits;
    const ValidationReport report = PredictPublishedRuns(runs);
    const ValidatedTable& t = report.tables[0];
    CHECK_FALSE(t.rows[0].cost.fits);
    CHECK(t.rows[0].fit_tight());
    CHECK_FALSE(t.rows[0].fit_disagrees());  // it may have fitted or not
    CHECK(t.fit_disagreements == 0);
    CHECK(t.tight_fits == 1);
    const std::string text = FormatValidationTable(report);
    CHECK(text.find("  tight  <- fits if the allocator wastes less (predicted ") !=
          std::string::npos);
    CHECK(text.find("fit: as published in 0 of 1 rows; tight in 1 (tiny): over only by the "
                    "allocator's assumed fragmentation\n") != std::string::npos);
    const nlohmann::json j = ValidationToJson(report)["tables"][0];
    CHECK(j["tight_fits"] == 1);
    CHECK(j["rows"][0]["fit_tight"] == true);
  }
}

TEST_CASE("a hostile runs file is an InputError at its file, line and field",
          "[planner][validation]") {
  test::TempDir dir;
  const std::string good_row =
      "      - {name: r, model: llama2-7b, gpus: 8, global_batch: 8, plan: \"dp=8,mbs=1\",\n"
      "         published: 100}\n";
  struct Case {
    const char* what;
    std::string text;
    const char* field;
    int line;
    const char* says;
  };
  const Case cases[] = {
      {"unknown framework", OneTable(good_row, "    framework: megatron\n"
                                               "    figure: tokens_per_s_per_gpu\n"),
       "tables[0].framework", 6, "megatron-core, megatron-lm-2021"},
      {"unknown row framework",
       OneTable("      - {name: r, model: llama2-7b, gpus: 8, global_batch: 8, framework: paxml,\n"
                "         plan: \"dp=8,mbs=1\", published: 100}\n"),
       "tables[0].rows[0].framework", 10, "torchtitan"},
      {"bad figure", OneTable(good_row, "    framework: torchtitan\n"
                                        "    figure: tokens_per_second\n"),
       "tables[0].figure", 7, "tokens_per_s_per_gpu"},
      {"negative figure",
       OneTable("      - {name: r, model: llama2-7b, gpus: 8, global_batch: 8, plan: \"dp=8\",\n"
                "         published: -3}\n"),
       "tables[0].rows[0].published", 11, ""},
      {"fits: maybe",
       OneTable("      - {name: r, model: llama2-7b, gpus: 8, global_batch: 8, plan: \"dp=8\",\n"
                "         published: 100, fits: maybe}\n"),
       "tables[0].rows[0].fits", 11, ""},
      {"a run that fitted without its figure",
       OneTable("      - {name: r, model: llama2-7b, gpus: 8, global_batch: 8, plan: \"dp=8\"}\n"),
       "tables[0].rows[0].published", 10, "missing"},
      {"an empty skip reason",
       OneTable("      - {name: r, plan: \"dp=8\", published: 100, skip: \" \"}\n"),
       "tables[0].rows[0].skip", 10, "reason"},
      {"an unknown model",
       OneTable("      - {name: r, model: llama9-1t, gpus: 8, global_batch: 8, plan: \"dp=8\",\n"
                "         published: 100}\n"),
       "tables[0].rows[0].model", 10, "llama9-1t"},
      {"a model given twice",
       OneTable("      - {name: r, model: llama2-7b, hidden: 4096, gpus: 8, global_batch: 8,\n"
                "         plan: \"dp=8\", published: 100}\n"),
       "tables[0].rows[0].hidden", 10, "model: llama2-7b"},
      {"an unknown key",
       OneTable("      - {name: r, model: llama2-7b, gpus: 8, global_batch: 8, plan: \"dp=8\",\n"
                "         published: 100, fit: false}\n"),
       "tables[0].rows[0].fit", 11, "fits"},
      {"an unknown optimizer dtype",
       OneTable("      - {name: r, model: llama2-7b, gpus: 8, global_batch: 8, plan: \"dp=8\",\n"
                "         published: 100, fp8_states: fp16}\n"),
       "tables[0].rows[0].fp8_states", 11, "bf16, fp32; got 'fp16'"},
      {"an unknown loss kernel",
       OneTable("      - {name: r, model: llama2-7b, gpus: 8, global_batch: 8, plan: \"dp=8\",\n"
                "         published: 100, loss: liger}\n"),
       "tables[0].rows[0].loss", 11, "fp32-in-place, cross-entropy"},
      {"an unknown norm kernel",
       OneTable("      - {name: r, model: llama2-7b, gpus: 8, global_batch: 8, plan: \"dp=8\",\n"
                "         published: 100, norm: triton}\n"),
       "tables[0].rows[0].norm", 11, "fused, unfused"},
  };
  // A table may leave its framework out: its rows get their GPU's default, as on the
  // command line.
  CHECK(LoadPublishedRuns(dir.Write("no_framework.yaml",
                                    OneTable(good_row, "    figure: tokens_per_s_per_gpu\n")))
            .tables[0]
            .rows[0]
            .framework == "megatron-core");
  for (const Case& c : cases) {
    CAPTURE(c.what, c.text);
    const std::string path = dir.Write("hostile.yaml", c.text);
    const InputError e = test::ErrorOf([&] { LoadPublishedRuns(path); });
    CHECK(e.where().file == path);
    CHECK(e.field() == c.field);
    CHECK(e.where().line == c.line);
    CHECK(std::string(e.what()).find(c.says) != std::string::npos);
  }
}

TEST_CASE("a bad runs file is an InputError at its line", "[planner][validation]") {
  const auto path = std::filesystem::temp_directory_path() / "meshplan_bad_published_runs.yaml";
  {
    std::ofstream out(path);
    out << "tables:\n"
           "  - id: t\n"
           "    paper: p\n"
           "    source: s\n"
           "    page: x.md\n"
           "    framework: megatron-lm-2022\n"
           "    figure: step_time_s\n"
           "    common: {block: gpt, vocab_size: 51200, seq_len: 2048, tied_embeddings: true,\n"
           "             ffn_multiplier: 4, gpu: a100-80gb, precision: mixed}\n"
           "    rows:\n"
           "      - {name: r, heads: 64, hidden: 6144, layers: 48, gpus: 8, global_batch: 4,\n"
           "         plan: \"dp=1,tp=4,mbs=4\", published: 1.0}\n";
  }
  try {
    LoadPublishedRuns(path.string());
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(e.field() == "tables[0].rows[0].plan");
    CHECK(e.where().line == 12);
    CHECK(std::string(e.what()).find("world_size") != std::string::npos);
  }
  std::filesystem::remove(path);
  CHECK_THROWS_AS(LoadPublishedRuns("/nonexistent/published_runs.yaml"), InputError);
}

}  // namespace
}  // namespace meshplan

namespace meshplan {
namespace {

// The accuracy issue 12 asks for, on the tables where the cost model reaches it: a guard
// against regressions (the rows are the physics' check, never its input). Narayanan
// Table 1 does not meet the 10% goal yet (docs/validation/README.md): only a looser guard.
TEST_CASE("the published tables stay within their accuracy goals", "[planner][validation]") {
  const ValidatedTable time = PredictPublishedTable(Table("korthikanti2022-table5"));
  CHECK(time.mape_pct <= 10);
  CHECK(time.max_abs_error_pct <= 20);
  const ValidatedTable memory = PredictPublishedTable(Table("korthikanti2022-figure1"));
  CHECK(memory.mape_pct <= 3);
  const ValidatedTable tflops = PredictPublishedTable(Table("narayanan2021-table1"));
  CHECK(tflops.mape_pct <= 20);
  CHECK(tflops.max_abs_error_pct <= 25);
}

}  // namespace
}  // namespace meshplan
