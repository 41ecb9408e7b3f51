// Config loading: every shipped config, the NxGPU shorthand, Hugging Face config.json,
// plan file round trips, and one test per kind of bad input (file:line:column, field,
// expectation). Fixtures live in tests/data/configs and tests/data/hf.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "planner/config/framework_yaml.h"
#include "planner/config/config_loader.h"
#include "planner/config/yaml_fields.h"
#include "planner/cost/param_count.h"
#include "planner/input_error.h"
#include "tests/planner/test_util.h"

namespace meshplan {
namespace {

namespace fs = std::filesystem;

std::string Fixture(const std::string& name) {
  return std::string(MESHPLAN_SOURCE_DIR) + "/tests/data/configs/" + name;
}
std::string HfFixture(const std::string& name) {
  return std::string(MESHPLAN_SOURCE_DIR) + "/tests/data/hf/" + name;
}

using test::ErrorOf;
using test::TempDir;


std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// ---------------------------------------------------------------- shipped configs

TEST_CASE("the configs folder is found and lists every shipped config", "[planner][config]") {
  CHECK(fs::is_directory(ConfigsDir() / "models"));
  const std::vector<std::string> expected_models = {
      "deepseek-v3", "gpt-1.3b",  "gpt2-medium", "gpt2-small", "gpt2-xl",       "gpt3-175b",
      "llama-1b",    "llama2-13b", "llama2-70b", "llama2-7b",  "llama3-70b",    "llama3-8b",
      "llama3.1-405b", "mixtral-8x7b", "mt-nlg-530b", "nemotron3-22b", "nemotron3-8b",
      "nemotron4-340b", "qwen3-30b-a3b", "qwen3-8b", "spec-194m-tied", "spec-246m", "spec-7b",
      "tiny-llama", "tiny-moe"};
  CHECK(ListModels() == expected_models);
  CHECK(ListGpus() == std::vector<std::string>{"a100-40gb", "a100-80gb", "a40", "b200", "cpu-ci",
                                               "h100-pcie", "h100-sxm", "h100-sxm-96gb", "h200"});
  CHECK(ListClusters() ==
        std::vector<std::string>{"1024xh100-ib", "16384xh100-ib", "2xa40-pcie", "5120xa100-ib",
                                 "64xa100-ib", "64xh100-ib", "8xh100-nvlink", "cpu-1x"});
}

TEST_CASE("every shipped model loads and is well formed", "[planner][config]") {
  const std::string name = GENERATE(from_range(ListModels()));
  CAPTURE(name);
  const ModelSpec m = LoadModel(name);
  CHECK(m.name == name);
  CHECK(m.hidden % m.heads == 0);
  CHECK(m.heads % m.kv_heads == 0);
  CHECK(m.ffn_hidden >= m.hidden);
  CHECK(m.head_dim() >= 32);
  CHECK(m.head_dim() <= 256);
  if (m.block == BlockKind::kGpt) {
    CHECK(m.ffn_hidden == 4 * m.hidden);
    CHECK(m.max_seq > 0);
  }
  const int64_t params = CountParams(m);
  CHECK(params > 1'000'000);
  CHECK(params < 1'000'000'000'000);
  // The same model by path and by a differently cased name.
  CHECK(LoadModel((ConfigsDir() / "models" / (name + ".yaml")).string()) == m);
}

TEST_CASE("the spec models have the parameter counts of docs/cost_model.md section 1",
          "[planner][config][params]") {
  CHECK(CountParams(LoadModel("spec-194m-tied")) == 194'103'296);
  CHECK(CountParams(LoadModel("spec-246m")) == 245'566'464);
  CHECK(CountParams(LoadModel("spec-7b")) == 7'257'206'784);
  CHECK(LoadModel("spec-194m-tied").tied_embeddings);
  CHECK_FALSE(LoadModel("spec-7b").tied_embeddings);
}

TEST_CASE("published models have their published parameter counts", "[planner][config][params]") {
  // Exact counts of the released checkpoints (sum of tensor sizes in the HF safetensors index;
  // GPT-2: GPT2LMHeadModel without the tied lm_head).
  CHECK(CountParams(LoadModel("llama2-7b")) == 6'738'415'616);
  CHECK(CountParams(LoadModel("llama2-13b")) == 13'015'864'320);
  CHECK(CountParams(LoadModel("llama2-70b")) == 68'976'648'192);
  CHECK(CountParams(LoadModel("llama3-8b")) == 8'030'261'248);
  CHECK(CountParams(LoadModel("llama3-70b")) == 70'553'706'496);
  CHECK(CountParams(LoadModel("llama3.1-405b")) == 405'853'388'800);
  CHECK(CountParams(LoadModel("gpt2-small")) == 124'439'808);
  CHECK(CountParams(LoadModel("gpt2-medium")) == 354'823'168);
  CHECK(CountParams(LoadModel("gpt2-xl")) == 1'557'611'200);
  // Papers round: GPT-3 "175B", MT-NLG "530B" (within 1%).
  CHECK(static_cast<double>(CountParams(LoadModel("gpt3-175b"))) == Approx(175e9).epsilon(0.01));
  CHECK(static_cast<double>(CountParams(LoadModel("mt-nlg-530b"))) == Approx(530e9).epsilon(0.01));
  CHECK(static_cast<double>(CountParams(LoadModel("gpt-1.3b"))) == Approx(1.3e9).epsilon(0.03));
  const ModelSpec tiny = LoadModel("tiny-llama");
  CHECK(tiny.hidden == 256);
  CHECK(tiny.kv_heads == 4);
  CHECK(tiny.ffn_hidden == 688);
  CHECK(tiny.vocab_size == 8192);
}

// CPU profiles (written by `meshplan calibrate`, names starting with "cpu") are measured,
// not data-sheet values: they get their own checks below.
bool IsCpuProfile(const std::string& name) { return name.rfind("cpu", 0) == 0; }

std::vector<std::string> DataSheetGpus() {
  std::vector<std::string> out;
  for (const auto& name : ListGpus())
    if (!IsCpuProfile(name)) out.push_back(name);
  return out;
}

TEST_CASE("the shipped CPU profile loads with measured, positive rates", "[planner][config]") {
  const GpuSpec g = LoadGpu("cpu-ci");
  CHECK(g.memory_bytes > 0);
  CHECK(g.peak_flops_fp32 > 1e9);
  CHECK(g.memory_bandwidth_Bps > 1e9);
  CHECK(g.matmul_efficiency > 0);
  CHECK(g.matmul_efficiency <= 1);
  CHECK(g.source.find("meshplan calibrate") != std::string::npos);
}

TEST_CASE("every shipped GPU loads with SI units and sane numbers", "[planner][config]") {
  const std::string name = GENERATE(from_range(DataSheetGpus()));
  CAPTURE(name);
  const GpuSpec g = LoadGpu(name);
  CHECK(g.name == name);
  CHECK(g.memory_bytes > 16LL * 1024 * 1024 * 1024);
  CHECK(g.memory_bytes % (1024 * 1024) == 0);
  CHECK(g.peak_flops_fp32 > 1e13);
  CHECK(g.peak_flops_bf16 > 2 * g.peak_flops_fp32);
  CHECK(g.peak_flops_tf32 < g.peak_flops_bf16);
  CHECK((g.peak_flops_fp8 == 0 || g.peak_flops_fp8 == Approx(2 * g.peak_flops_bf16).epsilon(0.01)));
  CHECK(g.memory_bandwidth_Bps > 5e11);
  CHECK(g.memory_bandwidth_Bps < 1e13);
  for (double eff : {g.matmul_efficiency, g.attention_efficiency, g.memory_bandwidth_efficiency}) {
    CHECK(eff > 0);
    CHECK(eff <= 1);
  }
  CHECK(g.matmul_ceiling_efficiency >= 0);
  CHECK(g.matmul_ceiling_efficiency <= g.matmul_efficiency);  // a ceiling below the main loop
  CHECK(g.kernel_overhead_s > 0);
  CHECK(g.kernel_overhead_s < 1e-4);
  CHECK_FALSE(g.source.empty());
  CHECK(g.PeakFlops(Precision::kMixed) == g.peak_flops_bf16);
}

TEST_CASE("GPU numbers convert from the YAML units", "[planner][config]") {
  const GpuSpec a40 = LoadGpu("a40");
  CHECK(a40.memory_bytes == 46068LL * 1024 * 1024);  // the documents' "46 GB card"
  CHECK(a40.peak_flops_bf16 == 149.7e12);
  CHECK(a40.memory_bandwidth_Bps == 696e9);  // 0.696 TB/s, converted without rounding
  CHECK(a40.peak_flops_fp8 == 0);
  const GpuSpec h100 = LoadGpu("h100-sxm");
  CHECK(h100.peak_flops_bf16 == 989.4e12);
  CHECK(h100.memory_bandwidth_Bps == 3.35e12);
  CHECK(h100.kernel_overhead_s == 4e-6);
  // Per attention kernel: the file's figure, else FlashAttention-2's (`attention`).
  const GpuSpec a100 = LoadGpu("a100-80gb");
  CHECK(a100.AttentionEfficiency(AttentionKernel::kCudnn) == a100.attention_efficiency);
  CHECK(a100.AttentionEfficiency(AttentionKernel::kFlash2) == a100.attention_efficiency);
}

TEST_CASE("GPU aliases are unique and match case-insensitively", "[planner][config]") {
  CHECK(LoadGpu("H100").name == "h100-sxm");
  CHECK(LoadGpu("h100").name == "h100-sxm");
  CHECK(LoadGpu("A100-80GB").name == "a100-80gb");
  CHECK(LoadGpu("A40").name == "a40");
  CHECK(LoadGpu("H100-SXM").name == "h100-sxm");
  CHECK(LoadGpu("H100-PCIe").name == "h100-pcie");
  // No alias may name two GPUs, and none may shadow another GPU's file name.
  const std::vector<std::string> stems = ListGpus();
  std::set<std::string> seen;
  for (const auto& name : DataSheetGpus()) {  // CPU profiles carry no aliases
    const std::string text = ReadText(ConfigsDir() / "hardware" / (name + ".yaml"));
    const auto begin = text.find("aliases: [");
    REQUIRE(begin != std::string::npos);
    std::stringstream list(text.substr(begin + 10, text.find(']', begin) - begin - 10));
    std::string alias;
    while (std::getline(list, alias, ',')) {
      alias.erase(0, alias.find_first_not_of(' '));
      std::string lower;
      for (char c : alias) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      CAPTURE(name, alias);
      CHECK(seen.insert(lower).second);
      for (const auto& other : stems) CHECK((other == name || other != lower));
      CHECK(LoadGpu(alias).name == name);
    }
  }
}

TEST_CASE("every shipped cluster loads and its size matches its name", "[planner][config]") {
  const std::string name = GENERATE(from_range(ListClusters()));
  CAPTURE(name);
  const ClusterSpec c = LoadCluster(name);
  CHECK(c.name == name);
  // "<N>x<gpu>-<network>", or "cpu-<N>x" for a CPU profile's cluster.
  const std::string size = IsCpuProfile(name) ? name.substr(4, name.find('x') - 4)
                                              : name.substr(0, name.find('x'));
  CHECK(std::to_string(c.world_size()) == size);
  CHECK(c.intra_node.bandwidth_Bps > 0);
  CHECK(c.inter_node.bandwidth_Bps > 0);
  CHECK(c.intra_node.bandwidth_Bps >= c.inter_node.bandwidth_Bps);
  // GPU interconnects: microseconds; a CPU profile's ranks talk Gloo over loopback TCP,
  // measured by meshplan calibrate at 0.1-0.2 ms per ring step.
  CHECK(c.intra_node.latency_s < (IsCpuProfile(name) ? 1e-3 : 1e-4));
  CHECK_FALSE(c.intra_node.name.empty());
  CHECK_FALSE(c.inter_node.name.empty());
  CHECK(c.gpu == LoadGpu(c.gpu.name));
}

TEST_CASE("clusters take missing tiers from the GPU's network block", "[planner][config]") {
  const ClusterSpec node = LoadCluster("8xh100-nvlink");
  CHECK(node.nodes == 1);
  CHECK(node.gpus_per_node == 8);
  CHECK(node.intra_node.name == "NVLink4");
  CHECK(node.intra_node.bandwidth_Bps == 450e9);
  CHECK(node.intra_node.latency_s == 3e-6);
  CHECK(node.inter_node.bandwidth_Bps == 50e9);
  const ClusterSpec a40 = LoadCluster("2xa40-pcie");
  CHECK(a40.world_size() == 2);
  CHECK(a40.gpu.memory_bytes == 46068LL * 1024 * 1024);
  CHECK(a40.intra_node.bandwidth_Bps == 32e9);
  CHECK(LoadCluster("64xa100-ib").inter_node.bandwidth_Bps == 25e9);
}

TEST_CASE("clusters with an inline GPU and relative GPU paths", "[planner][config]") {
  const ClusterSpec c = LoadCluster(Fixture("cluster_inline_gpu.yaml"));
  CHECK(c.world_size() == 6);
  CHECK(c.gpu.name == "toy-gpu");
  CHECK(c.gpu.memory_bytes == 8192LL * 1024 * 1024 + 512 * 1024);
  CHECK(c.gpu.peak_flops_bf16 == 10.5e12);
  CHECK(c.gpu.matmul_efficiency == 0.61);
  CHECK(c.gpu.kernel_overhead_s == 7.3e-6);
  CHECK(c.intra_node.bandwidth_Bps == 12.345e9);
  CHECK(c.inter_node.latency_s == 23.1e-6);
  const ClusterSpec rel = LoadCluster(Fixture("cluster_relative_gpu.yaml"));
  CHECK(rel.name == "cluster_relative_gpu");  // no name key: the file stem
  CHECK(rel.gpu.name == "lonely-gpu");
}

// ---------------------------------------------------------------- NxGPU shorthand

TEST_CASE("NxGPU shorthand builds nodes of the GPU's gpus_per_node", "[planner][config]") {
  const ClusterSpec one = LoadCluster("8xH100");
  CHECK(one.gpu.name == "h100-sxm");
  CHECK(one.nodes == 1);
  CHECK(one.gpus_per_node == 8);
  CHECK(one.intra_node.bandwidth_Bps == 450e9);
  const ClusterSpec many = LoadCluster("64xH100");
  CHECK(many.nodes == 8);
  CHECK(many.gpus_per_node == 8);
  CHECK(many.inter_node.bandwidth_Bps == 50e9);
  CHECK(many.name == "64xH100");
  const ClusterSpec part = LoadCluster("4xh100");
  CHECK(part.nodes == 1);
  CHECK(part.gpus_per_node == 4);
  const ClusterSpec a100 = LoadCluster("5120xA100-80GB");
  CHECK(a100.gpu.name == "a100-80gb");
  CHECK(a100.nodes == 640);
  CHECK(LoadCluster("2XA40").gpu.memory_bytes == 46068LL * 1024 * 1024);
  // The shorthand and the cluster file describe the same machine.
  ClusterSpec file = LoadCluster("64xh100-ib");
  file.name = many.name;
  CHECK(file == many);
}

TEST_CASE("NxGPU shorthand errors name the rule", "[planner][config][errors]") {
  const InputError uneven = ErrorOf([] { LoadCluster("12xH100"); });
  CHECK(uneven.field() == "cluster");
  CHECK_THAT(uneven.what(), Catch::Contains("12xH100") && Catch::Contains("nodes of 8") &&
                                Catch::Contains("multiple of 8") && Catch::Contains("16xH100"));
  CHECK_THAT(ErrorOf([] { LoadCluster("0xH100"); }).what(), Catch::Contains("N >= 1"));
  CHECK_THAT(ErrorOf([] { LoadCluster("99999999999999999999xH100"); }).what(),
             Catch::Contains("out of range"));
  const InputError gpu = ErrorOf([] { LoadCluster("8xH900"); });
  CHECK_THAT(gpu.what(), Catch::Contains("unknown GPU 'H900'") && Catch::Contains("h100-sxm") &&
                             Catch::Contains("aliases: ") && Catch::Contains("H100"));
  CHECK_THAT(ErrorOf([] { LoadCluster("8x" + Fixture("gpu_no_network.yaml")); }).what(),
             Catch::Contains("no such file"));  // shorthand takes names, the rest is a path
}

TEST_CASE("unknown names list what is available", "[planner][config][errors]") {
  const InputError model = ErrorOf([] { LoadModel("llama9-1t"); });
  CHECK(model.field() == "model");
  CHECK_THAT(model.what(), Catch::Contains("unknown model 'llama9-1t'") &&
                               Catch::Contains("llama2-7b") && Catch::Contains("spec-7b") &&
                               Catch::Contains("config.json"));
  CHECK_THAT(ErrorOf([] { LoadCluster("my-cluster"); }).what(),
             Catch::Contains("unknown cluster") && Catch::Contains("64xh100-ib") &&
                 Catch::Contains("NxGPU"));
  CHECK_THAT(ErrorOf([] { LoadGpu("tpu-v5"); }).what(),
             Catch::Contains("unknown GPU 'tpu-v5'") && Catch::Contains("a40"));
  CHECK_THAT(ErrorOf([] { LoadModel("no/such/model.yaml"); }).what(),
             Catch::Contains("no/such/model.yaml") && Catch::Contains("no such file"));
}

// ---------------------------------------------------------------- Hugging Face config.json

TEST_CASE("HF Llama config.json matches the shipped Llama 3 8B", "[planner][config][hf]") {
  const ModelSpec hf = LoadHfConfig(HfFixture("llama3-8b/config.json"));
  CHECK(hf.name == "llama3-8b");  // the folder of a config.json
  ModelSpec shipped = LoadModel("llama3-8b");
  CHECK(hf == shipped);
  CHECK(LoadModel(HfFixture("llama3-8b/config.json")) == hf);  // LoadModel dispatches .json
  CHECK(LoadModel(HfFixture("llama3-8b")) == hf);              // and a folder holding one
}

TEST_CASE("HF GPT-2 config.json matches the shipped gpt2-small", "[planner][config][hf]") {
  ModelSpec hf = LoadHfConfig(HfFixture("gpt2/config.json"));
  CHECK(hf.block == BlockKind::kGpt);
  CHECK(hf.ffn_hidden == 4 * 768);  // n_inner: null
  CHECK(hf.tied_embeddings);
  hf.name = "gpt2-small";
  CHECK(hf == LoadModel("gpt2-small"));
  CHECK(CountParams(hf) == 124'439'808);
}

TEST_CASE("HF config defaults and other Llama-style model types", "[planner][config][hf]") {
  const ModelSpec mistral = LoadHfConfig(HfFixture("mistral-like.json"));
  CHECK(mistral.name == "example/mistral-like-7b");
  CHECK(mistral.kv_heads == 8);
  CHECK(mistral.max_seq == 32768);
  CHECK(mistral.block == BlockKind::kLlama);
  const ModelSpec plain = LoadHfConfig(HfFixture("no_kv_heads.json"));
  CHECK(plain.kv_heads == plain.heads);  // num_key_value_heads defaults to heads
  CHECK_FALSE(plain.tied_embeddings);
  CHECK(plain.max_seq == 0);
}

TEST_CASE("HF config errors name the file, field and expectation", "[planner][config][hf][errors]") {
  const InputError missing = ErrorOf([] { LoadHfConfig(HfFixture("missing_field.json")); });
  CHECK(missing.field() == "intermediate_size");
  CHECK_THAT(missing.what(), Catch::Contains("missing_field.json") &&
                                 Catch::Contains("missing required field"));
  const InputError type = ErrorOf([] { LoadHfConfig(HfFixture("wrong_type.json")); });
  CHECK(type.field() == "num_hidden_layers");
  CHECK_THAT(type.what(), Catch::Contains("expected a positive integer") && Catch::Contains("\"32\""));
  const InputError syntax = ErrorOf([] { LoadHfConfig(HfFixture("malformed.json")); });
  CHECK(syntax.where().line == 5);  // the missing ',' is noticed at the end of line 5's key
  CHECK(syntax.where().column == 23);
  CHECK_THAT(syntax.what(), Catch::Contains("malformed.json:5:23") && Catch::Contains("malformed JSON"));
  const InputError bert = ErrorOf([] { LoadHfConfig(HfFixture("unsupported.json")); });
  CHECK(bert.field() == "model_type");
  CHECK_THAT(bert.what(), Catch::Contains("'bert'") && Catch::Contains("llama, mistral, qwen2") &&
                              Catch::Contains("mixtral"));
  TempDir dir;
  for (const char* heads : {"0", "-8", "1e3", "99999999999999999999"}) {
    CAPTURE(heads);
    const fs::path path = dir.path / "config.json";
    std::ofstream(path) << R"({"model_type": "llama", "hidden_size": 512, "intermediate_size": 1024,
      "num_attention_heads": )" << heads << R"(, "num_hidden_layers": 2, "vocab_size": 1000})";
    const InputError e = ErrorOf([&] { LoadHfConfig(path.string()); });
    CHECK(e.field() == "num_attention_heads");
    CHECK_THAT(e.what(), Catch::Contains("config.json") && Catch::Contains("positive integer"));
  }
  const InputError kv = ErrorOf([] { LoadHfConfig(HfFixture("kv_not_divisible.json")); });
  CHECK(kv.field() == "num_key_value_heads");
  CHECK_THAT(kv.what(), Catch::Contains("heads=16 is not divisible by kv_heads=6"));
}

// ---------------------------------------------------------------- units

TEST_CASE("unit conversions shift decimal exponents exactly", "[planner][config][units]") {
  CHECK(ParseShifted("989.4", 12) == 989.4e12);
  CHECK(ParseShifted("0.696", 12) == 696e9);
  CHECK(ParseShifted("3", -6) == 3e-6);
  CHECK(ParseShifted("1.5e3", 9) == 1.5e12);
  CHECK(ParseShifted("+2.5E-1", 0) == 0.25);
  CHECK(FormatShifted(989.4e12, 12) == "989.4");
  CHECK(FormatShifted(450e9, 9) == "450");
  CHECK(FormatShifted(3e-4, 0) == "0.0003");
  CHECK(FormatShifted(81559, 0) == "81559");
  CHECK(FormatShifted(1e-3, 12) == "1.0e-15");
  CHECK(FormatShifted(1.0 / 3.0, 0) == "0.3333333333333333");
  CHECK(FormatShifted(0, 12) == "0");
  // Every double survives write -> read in every unit (xorshift sweep over 40 decades).
  uint64_t state = 0x9E3779B97F4A7C15ull;
  int failures = 0;
  for (int i = 0; i < 20000; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    const double value = static_cast<double>(state >> 11) * 0x1p-53 *
                         std::pow(10.0, static_cast<int>(state % 40) - 20);
    for (int exponent : {12, 9, -6, 0})
      if (ParseShifted(FormatShifted(value, exponent), exponent) != value) ++failures;
  }
  CHECK(failures == 0);
}

// ---------------------------------------------------------------- plan files

TEST_CASE("the example plan file loads and validates", "[planner][config][plan]") {
  const PlanFile p = LoadPlanFile((ConfigsDir() / "plans" / "example-7b-8xh100.yaml").string());
  CHECK(p.model == LoadModel("llama2-7b"));
  CHECK(p.cluster == LoadCluster("8xh100-nvlink"));
  CHECK(p.training.global_batch == 64);
  CHECK(p.training.seq_len == 4096);
  CHECK(p.training.precision == Precision::kMixed);
  CHECK(p.training.learning_rate == 3e-4);
  CHECK(p.plan == ParsePlanString("dp=2,tp=4,zero=1,sp=1,recompute=selective"));
}

TEST_CASE("plan file defaults, inline models and relative paths", "[planner][config][plan]") {
  const PlanFile p = LoadPlanFile(Fixture("plan_relative.yaml"));
  CHECK(p.model.name == "inline-model");
  CHECK(p.model.block == BlockKind::kGpt);
  CHECK(p.model.kv_heads == 4);
  CHECK(p.cluster.gpu.name == "lonely-gpu");
  CHECK(p.training.precision == Precision::kMixed);
  CHECK(p.training.steps == TrainingSpec{}.steps);
  ParallelPlan expected;
  expected.dp = 2;
  CHECK(p.plan == expected);
}

TEST_CASE("plan files round-trip exactly: save -> load == original", "[planner][config][plan]") {
  TempDir dir;
  const std::string cluster = GENERATE(from_range(ListClusters()));
  CAPTURE(cluster);
  PlanFile p;
  p.model = LoadModel("llama2-70b");
  p.cluster = LoadCluster(cluster);
  p.training.global_batch = 2 * p.cluster.world_size();
  p.training.seq_len = 4096;
  p.training.precision = Precision::kBf16;
  p.training.steps = 7;
  p.training.learning_rate = 1.5e-4;
  p.plan = ParsePlanString("dp=" + std::to_string(p.cluster.world_size()) +
                           ",zero=3,recompute=full,mbs=2,tp_overlap=1");
  const fs::path path = dir.path / "plan.yaml";
  SavePlanFile(path.string(), p);
  CHECK(LoadPlanFile(path.string()) == p);
  CHECK(PlanFileToYaml(LoadPlanFile(path.string())) == ReadText(path));
  // Nothing but the plan is left behind (the temp file was renamed over it).
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
}

TEST_CASE("plan files round-trip awkward values exactly", "[planner][config][plan]") {
  TempDir dir;
  PlanFile p;
  p.model = LoadModel("tiny-llama");
  p.model.name = "";
  p.cluster = LoadCluster(Fixture("cluster_inline_gpu.yaml"));  // 8192.5 MiB, 1.7 us, 12.345 GB/s
  p.cluster.gpu.memory_bytes += 1;                              // not a whole KiB
  p.cluster.gpu.name = "gpu \"quoted\": with # and \\";
  p.cluster.intra_node.latency_s = 1.0 / 3.0 * 1e-6;
  // Awkward, yet within the physical bounds (docs/limits.md: at least 1 MB/s, 1 GFLOP/s).
  p.cluster.inter_node.bandwidth_Bps = (0.1 + 0.2) * 1e9;
  p.cluster.gpu.peak_flops_fp32 = 1.0 / 3.0 * 1e12;
  p.cluster.gpu.memory_bandwidth_Bps = 0.007457501535000001e12;  // not k * 1e12 for any double k
  p.cluster.gpu.kernel_overhead_s = 6.7795468500000011e-13;
  p.training.global_batch = 12;
  p.training.seq_len = 512;
  p.training.learning_rate = 0.1 + 0.2;
  p.training.moe_aux_loss_coef = 1.0 / 3.0;
  p.training.framework = LoadFramework("torchtitan");  // separate by default: fused is written
  p.training.framework.grad_accumulation = GradAccumulation::kFused;
  p.plan = ParsePlanString("dp=3,tp=2,pp=1,sp=1,zero=3,recompute=full");  // torchtitan: FSDP2 beside TP
  const fs::path path = dir.path / "awkward.yaml";
  SavePlanFile(path.string(), p);
  const PlanFile back = LoadPlanFile(path.string());
  CHECK(back.model == p.model);
  CHECK(back.cluster.gpu == p.cluster.gpu);
  CHECK(back.cluster == p.cluster);
  CHECK(back.training == p.training);
  CHECK(back == p);
  // Saving again overwrites in place.
  p.training.steps = 99;
  SavePlanFile(path.string(), p);
  CHECK(LoadPlanFile(path.string()).training.steps == 99);
}

TEST_CASE("saving a plan file into a missing folder is an InputError", "[planner][config][plan][errors]") {
  PlanFile p;
  p.model = LoadModel("tiny-llama");
  p.cluster = LoadCluster("1xH100");
  p.training.global_batch = 1;
  p.training.seq_len = 128;
  const InputError e = ErrorOf([&] { SavePlanFile("/nonexistent-dir/plan.yaml", p); });
  CHECK_THAT(e.what(), Catch::Contains("/nonexistent-dir/plan.yaml") && Catch::Contains("cannot write"));
}

TEST_CASE("the MoE aux loss coefficient: a training key, 0.01 by default, 0 to 10",
          "[planner][config][plan][moe]") {
  const PlanFile ep2 = LoadPlanFile((ConfigsDir() / "plans" / "tiny-moe-cpu-ep2.yaml").string());
  CHECK(ep2.training.moe_aux_loss_coef == 0.01);
  CHECK(TrainingSpec{}.moe_aux_loss_coef == 0.01);
  const std::string head = "model: tiny-moe\ncluster: 4xa40\ntraining:\n  global_batch: 8\n"
                           "  seq_len: 64\n  moe_aux_loss_coef: ";
  CHECK(PlanFileFromText(head + "0\nplan:\n  dp: 4\n", "zero.yaml").training.moe_aux_loss_coef == 0);
  for (const char* bad : {"-0.5", "11", "lots"}) {
    INFO(bad);
    const InputError e = ErrorOf([&] { PlanFileFromText(head + bad + "\nplan:\n  dp: 4\n", "bad.yaml"); });
    CHECK(e.field() == "training.moe_aux_loss_coef");
    CHECK_THAT(e.what(), Catch::Contains("bad.yaml:6:22"));
  }
}

TEST_CASE("grad_accumulation: a training key, the framework's by default, fused or separate",
          "[planner][config][plan]") {
  const std::string head = "model: tiny-llama\ncluster: 2xa40\ntraining:\n  global_batch: 8\n"
                           "  seq_len: 64\n";
  // A GPU cluster's default framework, megatron-core, fuses it.
  const PlanFile plain = PlanFileFromText(head + "plan:\n  dp: 2\n", "a.yaml");
  CHECK(plain.training.framework.name == "megatron-core");
  CHECK(plain.training.framework.grad_accumulation == GradAccumulation::kFused);
  CHECK(PlanFileFromText(head + "  grad_accumulation: separate\nplan:\n  dp: 2\n", "b.yaml")
            .training.framework.grad_accumulation == GradAccumulation::kSeparate);
  const InputError e = ErrorOf([&] {
    PlanFileFromText(head + "  grad_accumulation: sometimes\nplan:\n  dp: 2\n", "c.yaml");
  });
  CHECK(e.field() == "training.grad_accumulation");
  CHECK_THAT(e.what(), Catch::Contains("c.yaml:6:22") && Catch::Contains("fused, separate") &&
                           Catch::Contains("sometimes"));
}

TEST_CASE("fp8_states: a training key, the framework's by default, bf16 or fp32",
          "[planner][config][plan]") {
  const std::string head = "model: nemotron3-8b\ncluster: 8xH100\ntraining:\n  global_batch: 8\n"
                           "  seq_len: 4096\n  precision: fp8\n  framework: nemo\n";
  const PlanFile plain = PlanFileFromText(head + "plan:\n  dp: 8\n", "a.yaml");
  CHECK(plain.training.framework.fp8_states == Fp8StateDtype::kFp32);  // NeMo's optimizer default
  CHECK(PlanFileToYaml(plain).find("fp8_states") == std::string::npos);
  // A recipe's optim.dtype: bf16 (NeMo-Framework-Launcher 24.07 nemotron_340b.yaml).
  const PlanFile bf16 = PlanFileFromText(head + "  fp8_states: bf16\nplan:\n  dp: 8\n", "b.yaml");
  CHECK(bf16.training.framework.fp8_states == Fp8StateDtype::kBf16);
  CHECK(PlanFileFromText(PlanFileToYaml(bf16), "c.yaml").training.framework.fp8_states ==
        Fp8StateDtype::kBf16);
  const InputError e =
      ErrorOf([&] { PlanFileFromText(head + "  fp8_states: fp16\nplan:\n  dp: 8\n", "d.yaml"); });
  CHECK(e.field() == "training.fp8_states");
  CHECK_THAT(e.what(), Catch::Contains("d.yaml:8:15") && Catch::Contains("bf16, fp32") &&
                           Catch::Contains("fp16"));
}

TEST_CASE("loss: a training key, the framework's by default", "[planner][config][plan]") {
  const std::string head = "model: llama3-8b\ncluster: 8xH100\ntraining:\n  global_batch: 8\n"
                           "  seq_len: 8192\n  precision: fp8\n  framework: nemo\n";
  const PlanFile plain = PlanFileFromText(head + "plan:\n  dp: 8\n", "a.yaml");
  CHECK(plain.training.framework.loss == LossKernel::kFp32InPlace);
  CHECK(PlanFileToYaml(plain).find("loss:") == std::string::npos);
  // A recipe's cross_entropy_loss_fusion: true (NeMo-Framework-Launcher 24.07 llama3_8b.yaml).
  const PlanFile fused = PlanFileFromText(head + "  loss: fp32-fused\nplan:\n  dp: 8\n", "b.yaml");
  CHECK(fused.training.framework.loss == LossKernel::kFp32Fused);
  CHECK(PlanFileFromText(PlanFileToYaml(fused), "c.yaml").training.framework.loss ==
        LossKernel::kFp32Fused);
  const InputError e =
      ErrorOf([&] { PlanFileFromText(head + "  loss: liger\nplan:\n  dp: 8\n", "d.yaml"); });
  CHECK(e.field() == "training.loss");
  CHECK_THAT(e.what(), Catch::Contains("d.yaml:8:9") && Catch::Contains("fp32-fused") &&
                           Catch::Contains("liger"));
}

TEST_CASE("an invalid plan in a plan file names the file and the broken rule", "[planner][config][plan][errors]") {
  const InputError e = ErrorOf([] { LoadPlanFile(Fixture("plan_invalid.yaml")); });
  CHECK(e.field() == "plan");
  CHECK(e.where().line == 8);
  CHECK_THAT(e.what(), Catch::Contains("plan_invalid.yaml:8:3") &&
                           Catch::Contains("pp_divides_layers") && Catch::Contains("layers=4") &&
                           Catch::Contains("world_size"));
}

TEST_CASE("a bad plan value is located and lists the allowed values", "[planner][config][plan][errors]") {
  const InputError e = ErrorOf([] { LoadPlanFile(Fixture("plan_bad_value.yaml")); });
  CHECK(e.field() == "plan.recompute");
  CHECK_THAT(e.what(), Catch::Contains("plan_bad_value.yaml:9:14") &&
                           Catch::Contains("none, selective, full") && Catch::Contains("sometimes"));
}

TEST_CASE("an unknown plan key is located and lists the plan keys", "[planner][config][plan][errors]") {
  const InputError e = ErrorOf([] { LoadPlanFile(Fixture("plan_unknown_key.yaml")); });
  CHECK(e.field() == "plan.zero_stage");
  CHECK_THAT(e.what(), Catch::Contains("plan_unknown_key.yaml:7:3") &&
                           Catch::Contains("allowed keys: dp, tp, pp, cp, ep, zero,"));
}

TEST_CASE("an unknown model name in a plan file points at the plan file", "[planner][config][plan][errors]") {
  const InputError e = ErrorOf([] { LoadPlanFile(Fixture("plan_unknown_model.yaml")); });
  CHECK(e.field() == "model");
  CHECK_THAT(e.what(), Catch::Contains("plan_unknown_model.yaml:2:8") &&
                           Catch::Contains("unknown model 'llama9-1t'") &&
                           Catch::Contains("tiny-llama"));
}

// ---------------------------------------------------------------- one test per error kind

TEST_CASE("error: unknown key lists the allowed keys", "[planner][config][errors]") {
  const InputError e = ErrorOf([] { LoadModel(Fixture("model_unknown_key.yaml")); });
  CHECK(e.field() == "hiden");
  CHECK_THAT(e.what(), Catch::Contains("model_unknown_key.yaml:5:1: hiden: unknown key") &&
                           Catch::Contains("allowed keys: name, block, vocab_size, hidden,"));
}

TEST_CASE("error: missing required field", "[planner][config][errors]") {
  const InputError e = ErrorOf([] { LoadModel(Fixture("model_missing_field.yaml")); });
  CHECK(e.field() == "ffn_hidden");
  CHECK_THAT(e.what(), Catch::Contains("model_missing_field.yaml:2:1: ffn_hidden") &&
                           Catch::Contains("missing required field; expected a positive integer"));
}

TEST_CASE("error: wrong type", "[planner][config][errors]") {
  const InputError e = ErrorOf([] { LoadModel(Fixture("model_wrong_type.yaml")); });
  CHECK_THAT(e.what(), Catch::Contains("model_wrong_type.yaml:6:9: layers") &&
                           Catch::Contains("expected a positive integer") && Catch::Contains("'two'"));
  const InputError quoted = ErrorOf([] { LoadModel(Fixture("model_quoted_number.yaml")); });
  CHECK_THAT(quoted.what(), Catch::Contains("model_quoted_number.yaml:5:9: hidden") &&
                                Catch::Contains("got the string \"256\""));
}

TEST_CASE("error: zero and negative values", "[planner][config][errors]") {
  const InputError zero = ErrorOf([] { LoadModel(Fixture("model_zero.yaml")); });
  CHECK_THAT(zero.what(), Catch::Contains("model_zero.yaml:7:8: heads") &&
                              Catch::Contains("value 0 is out of range; expected a positive integer"));
  const InputError negative = ErrorOf([] { LoadModel(Fixture("model_negative.yaml")); });
  CHECK_THAT(negative.what(), Catch::Contains("model_negative.yaml:6:9: layers") &&
                                  Catch::Contains("value -4 is out of range"));
}

TEST_CASE("error: a value that overflows int64", "[planner][config][errors]") {
  const InputError e = ErrorOf([] { LoadModel(Fixture("model_overflow.yaml")); });
  CHECK(e.where().line == 4);
  CHECK(e.where().column == 13);
  CHECK_THAT(e.what(), Catch::Contains("vocab_size") && Catch::Contains("overflows a 64-bit integer"));
}

TEST_CASE("error: an absurd value", "[planner][config][errors]") {
  const InputError e = ErrorOf([] { LoadModel(Fixture("model_absurd.yaml")); });
  CHECK_THAT(e.what(), Catch::Contains("model_absurd.yaml:5:9: hidden") &&
                           Catch::Contains("out of range; expected a positive integer (at most 1e8)"));
}

TEST_CASE("error: hidden not divisible by heads", "[planner][config][errors]") {
  const InputError e = ErrorOf([] { LoadModel(Fixture("model_hidden_not_divisible.yaml")); });
  CHECK(e.field() == "hidden");
  CHECK_THAT(e.what(), Catch::Contains("model_hidden_not_divisible.yaml:5:9") &&
                           Catch::Contains("hidden=250 is not divisible by heads=8"));
}

TEST_CASE("error: heads not divisible by kv_heads", "[planner][config][errors]") {
  const InputError e = ErrorOf([] { LoadModel(Fixture("model_kv_not_divisible.yaml")); });
  CHECK(e.field() == "kv_heads");
  CHECK_THAT(e.what(), Catch::Contains("model_kv_not_divisible.yaml:8:11") &&
                           Catch::Contains("heads=8 is not divisible by kv_heads=3"));
}

TEST_CASE("error: a value outside an enum lists the allowed values", "[planner][config][errors]") {
  const InputError e = ErrorOf([] { LoadModel(Fixture("model_bad_enum.yaml")); });
  CHECK_THAT(e.what(), Catch::Contains("model_bad_enum.yaml:3:8: block") &&
                           Catch::Contains("expected one of: llama, gpt; got 'bert'"));
}

TEST_CASE("error: a key given twice", "[planner][config][errors]") {
  const InputError e = ErrorOf([] { LoadModel(Fixture("model_duplicate_key.yaml")); });
  CHECK_THAT(e.what(), Catch::Contains("model_duplicate_key.yaml:9:1: heads") &&
                           Catch::Contains("key given twice (first on line 7)"));
}

TEST_CASE("error: malformed YAML carries the parser's position", "[planner][config][errors]") {
  const InputError e = ErrorOf([] { LoadModel(Fixture("model_malformed.yaml")); });
  CHECK(e.where().file == Fixture("model_malformed.yaml"));
  CHECK(e.where().line > 0);
  CHECK(e.where().column > 0);
  CHECK_THAT(e.what(), Catch::Contains("malformed YAML"));
}

TEST_CASE("error: an efficiency above 1", "[planner][config][errors]") {
  const InputError e = ErrorOf([] { LoadGpu(Fixture("hardware_bad_efficiency.yaml")); });
  CHECK(e.field() == "efficiency.matmul");
  CHECK_THAT(e.what(), Catch::Contains("hardware_bad_efficiency.yaml:7:11") &&
                           Catch::Contains("value 1.5 is out of range; expected a number in [0.001, 1]"));
}

TEST_CASE("error: a cluster's unknown GPU points at the cluster file", "[planner][config][errors]") {
  const InputError e = ErrorOf([] { LoadCluster(Fixture("cluster_unknown_gpu.yaml")); });
  CHECK(e.field() == "gpu");
  CHECK_THAT(e.what(), Catch::Contains("cluster_unknown_gpu.yaml:3:6") &&
                           Catch::Contains("unknown GPU 'h900'") && Catch::Contains("h100-sxm"));
}

TEST_CASE("error: a missing network tier without a default", "[planner][config][errors]") {
  const InputError e = ErrorOf([] { LoadCluster(Fixture("cluster_missing_tier.yaml")); });
  CHECK(e.field() == "inter_node");
  CHECK_THAT(e.what(), Catch::Contains("cluster_missing_tier.yaml:2:1") &&
                           Catch::Contains("missing required field") &&
                           Catch::Contains("no network block"));
  CHECK_THAT(ErrorOf([] { LoadCluster("8x" + std::string("lonely")); }).what(),
             Catch::Contains("unknown GPU 'lonely'"));
}

TEST_CASE("error: a document that is not a mapping", "[planner][config][errors]") {
  TempDir dir;
  const fs::path path = dir.path / "list.yaml";
  std::ofstream(path) << "- 1\n- 2\n";
  const InputError e = ErrorOf([&] { LoadModel(path.string()); });
  CHECK_THAT(e.what(), Catch::Contains("list.yaml:1:1") && Catch::Contains("expected a mapping") &&
                           Catch::Contains("got a list"));
  std::ofstream(dir.path / "empty.yaml") << "# nothing\n";
  CHECK_THAT(ErrorOf([&] { LoadModel((dir.path / "empty.yaml").string()); }).what(),
             Catch::Contains("empty.yaml") && Catch::Contains("got an empty value"));
}

}  // namespace
}  // namespace meshplan

namespace meshplan {
namespace {

TEST_CASE("kernel_shape, bus_efficiency, comm_overlaps_compute, dp_overlap_slowdown and threads_per_rank out of range name the field",
          "[planner][config]") {
  struct Case {
    const char* yaml;
    const char* field;
  };
  const Case c = GENERATE(Case{"kernel_shape: {sm_count: -1}", "kernel_shape.sm_count"},
                          Case{"kernel_shape: {gemm_tile_m: 0}", "kernel_shape.gemm_tile_m"},
                          Case{"kernel_shape: {gemm_k_overhead: -8}", "kernel_shape.gemm_k_overhead"},
                          Case{"kernel_shape: {gemm_k_overhead_fp8: -8}", "kernel_shape.gemm_k_overhead_fp8"},
                          Case{"efficiency: {matmul: 0.9, matmul_fp8_ceiling: 1.2}", "efficiency.matmul_fp8_ceiling"},
                          Case{"efficiency: {matmul: 0.9, matmul_fp8_split_accumulate: 0}", "efficiency.matmul_fp8_split_accumulate"},
                          Case{"efficiency: {attention: 0.3, attention_cudnn: 1.5}", "efficiency.attention_cudnn"},
                          Case{"efficiency: {attention: 0.3, attention_flash3: 0}", "efficiency.attention_flash3"},
                          Case{"kernel_shape: {warp_size: 32}", "warp_size"},
                          Case{"efficiency: {matmul: 0.9, matmul_ceiling: 1.2}", "efficiency.matmul_ceiling"},
                          Case{"comm_overlaps_compute: sometimes", "comm_overlaps_compute"},
                          Case{"dp_overlap_slowdown: 1.5", "dp_overlap_slowdown"},
                          Case{"dp_overlap_slowdown: -0.1", "dp_overlap_slowdown"},
                          Case{"dp_overlap_slowdown: much", "dp_overlap_slowdown"},
                          Case{"threads_per_rank: 0", "threads_per_rank"},
                          Case{"threads_per_rank: 1.5", "threads_per_rank"},
                          Case{"threads_per_rank: 5000", "threads_per_rank"},
                          Case{"network: {gpus_per_node: 1, intra_node: {bandwidth_GBps: 1, latency_us: 300, "
                               "all_reduce: {bandwidth_GBps: 0, latency_us: 900}}, inter_node: "
                               "{bandwidth_GBps: 1, latency_us: 300}}",
                               "all_reduce.bandwidth_GBps"},
                          Case{"network: {gpus_per_node: 1, intra_node: {bandwidth_GBps: 1, latency_us: 300, "
                               "all_reduce: {latency_us: 900, tree: 1}}, inter_node: "
                               "{bandwidth_GBps: 1, latency_us: 300}}",
                               "tree"},
                          Case{"network: {gpus_per_node: 8, intra_node: {bandwidth_GBps: 450, "
                               "latency_us: 3, bus_efficiency: 1.5}, inter_node: "
                               "{bandwidth_GBps: 50, latency_us: 6}}",
                               "bus_efficiency"});
  TempDir dir;
  const fs::path file = dir.path / "gpu.yaml";
  std::ofstream(file) << "name: odd-gpu\nmemory_MiB: 81559\npeak_TFLOPs: {fp32: 66.9, bf16: 989.4}\n"
                         "memory_bandwidth_TBps: 3.35\n"
                      << c.yaml << "\n";
  const InputError e = ErrorOf([&] { LoadGpu(file.string()); });
  INFO(e.what());
  CHECK_THAT(e.what(), Catch::Contains(c.field));
  CHECK_THAT(e.what(), Catch::Contains("gpu.yaml:5"));
}

}  // namespace
}  // namespace meshplan
