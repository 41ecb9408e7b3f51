// The published runs (configs/validation/published_runs.yaml, docs/validation/) and their
// prediction (planner/validate/): the file holds every row of both papers as published, the
// paper's own formulas reproduce the paper's own numbers, and the detailed memory model
// reproduces Korthikanti et al.'s activation memory. Step-time accuracy is reported by
// `meshplan validate`, not asserted: these rows check the physics, they do not tune it.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "planner/cost/flops.h"
#include "planner/cost/memory_model.h"
#include "planner/cost/param_count.h"
#include "planner/input_error.h"
#include "planner/validate/published_runs.h"
#include "planner/validate/validation.h"

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

TEST_CASE("the published runs file holds every row of both papers", "[planner][validation]") {
  REQUIRE(Runs().tables.size() == 3);
  CHECK(Table("narayanan2021-table1").rows.size() == 10);   // GPT 1.7B .. 1T
  CHECK(Table("korthikanti2022-table5").rows.size() == 8);  // 4 models x (full, seq+selective)
  CHECK(Table("korthikanti2022-figure1").rows.size() == 8); // 4 models x (none, seq+selective)
  CHECK(Table("narayanan2021-table1").figure == PublishedFigure::kTflopsPerGpu);
  CHECK(Table("korthikanti2022-table5").figure == PublishedFigure::kStepTime);
  CHECK(Table("korthikanti2022-figure1").figure == PublishedFigure::kActivationMemory);
  for (const PublishedTable& t : Runs().tables) {
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
      CHECK(s.training.grad_accumulation == (t.id == "narayanan2021-table1"
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
      CHECK(r.published > 0);
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
    CHECK_THAT(model_flops / (gpus * 312e12 * r.published), WithinAbs(published_mfu, 0.003));
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
    CHECK_THAT(ClosedFormFirstStageBytes(r.setup) / kGiB, WithinRel(r.published, 0.001));
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

TEST_CASE("a bad runs file is an InputError at its line", "[planner][validation]") {
  const auto path = std::filesystem::temp_directory_path() / "meshplan_bad_published_runs.yaml";
  {
    std::ofstream out(path);
    out << "tables:\n"
           "  - id: t\n"
           "    paper: p\n"
           "    source: s\n"
           "    page: x.md\n"
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
    CHECK(e.where().line == 11);
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
