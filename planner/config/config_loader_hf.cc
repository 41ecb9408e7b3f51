// Hugging Face config.json -> ModelSpec (LoadHfConfig in planner/config/config_loader.h).
//
// Llama-style model types (llama, mistral, qwen2, qwen3) map to block llama, as does nemotron
// with its non-gated squared-ReLU FFN (hidden_act relu2: ffn_activation squared-relu); gpt2 maps to
// block gpt with F = 4E (n_inner when given) and tied embeddings. Mixtures of experts:
// mixtral (num_local_experts, num_experts_per_tok; each expert intermediate_size wide),
// qwen3_moe (num_experts, num_experts_per_tok, moe_intermediate_size; every layer sparse),
// deepseek_v2 / deepseek_v3 (n_routed_experts, num_experts_per_tok, moe_intermediate_size,
// n_shared_experts, first_k_dense_replace, and multi-head latent attention: q_lora_rank,
// kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim; v3's noaux_tc router
// bias). qwen3 and qwen3_moe have q/k RMSNorms and a head_dim of their own. Fields the
// planner does not model (rope scaling, sliding windows, dropout, router aux losses,
// DeepSeek's multi-token-prediction layers: num_nextn_predict_layers, which
// transformers does not load either) are ignored; qwen2's q/k/v biases are not counted
// (a few hundred thousand parameters). MoE keys in a config of another model_type, a
// MoE config missing one of its fields, and layer patterns meshplan cannot describe
// (qwen3_moe's decoder_sparse_step != 1 or mlp_only_layers, deepseek's moe_layer_freq
// != 1) are refused. Errors name the file and the JSON key; JSON syntax errors carry
// line:column.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "planner/config/config_loader.h"
#include "planner/config/config_loader_internal.h"
#include "planner/checked_math.h"
#include "planner/input_error.h"
#include "planner/input_file.h"
#include "planner/json_input.h"

namespace meshplan {
namespace {

using nlohmann::json;

constexpr const char* kSupportedTypes =
    "llama, mistral, qwen2, qwen3, nemotron (block llama), mixtral, qwen3_moe, deepseek_v2, deepseek_v3 "
    "(block llama, mixture of experts), gpt2 (block gpt)";

// Keys that make a config a mixture of experts, in the model types meshplan reads.
constexpr const char* kMoeKeys[] = {"num_local_experts", "num_experts", "n_routed_experts",
                                    "num_experts_per_tok", "moe_intermediate_size",
                                    "n_shared_experts", "first_k_dense_replace"};

// Typed reads of one JSON object, naming the file and the key on error.
class JsonFields {
 public:
  JsonFields(const json& object, std::string file) : object_(object), file_(std::move(file)) {}

  bool Has(const char* key) const { return object_.contains(key) && !object_.at(key).is_null(); }
  const json& object() const { return object_; }

  int64_t Int(const char* key) const {
    if (!Has(key)) Fail(key, "missing required field; expected a positive integer");
    const json& v = object_.at(key);
    const std::optional<int64_t> value = JsonInt64(v);
    if (!value) Fail(key, "expected a positive integer (at most 1e15), got " + Show(v));
    if (*value < 1 || *value > kMaxConfigInt)
      Fail(key, "value " + v.dump() + " is out of range; expected a positive integer (at most 1e15)");
    return *value;
  }
  int64_t Int(const char* key, int64_t fallback) const { return Has(key) ? Int(key) : fallback; }
  // 0 allowed (counts such as first_k_dense_replace); `fallback` when absent or null.
  int64_t Count(const char* key, int64_t fallback) const {
    if (!Has(key)) return fallback;
    const json& v = object_.at(key);
    const std::optional<int64_t> value = JsonInt64(v);
    if (!value || *value < 0 || *value > kMaxConfigInt)
      Fail(key, "expected a non-negative integer (at most 1e15), got " + Show(v));
    return *value;
  }

  bool Bool(const char* key, bool fallback) const {
    if (!Has(key)) return fallback;
    const json& v = object_.at(key);
    if (!v.is_boolean()) Fail(key, "expected true or false, got " + Show(v));
    return v.get<bool>();
  }

  std::string String(const char* key, const std::string& fallback) const {
    if (!Has(key)) return fallback;
    const json& v = object_.at(key);
    if (!v.is_string()) Fail(key, "expected a string, got " + Show(v));
    return v.get<std::string>();
  }

  [[noreturn]] void Fail(const std::string& key, const std::string& message) const {
    throw InputError({file_}, key, message);
  }

  // A value for a message: at most 60 characters of its JSON.
  static std::string Show(const json& v) {
    const std::string text = v.dump();
    return text.size() <= 60 ? text : text.substr(0, 57) + "...";
  }

 private:
  const json& object_;
  std::string file_;
};

// A readable name: _name_or_path, else the folder of a config.json, else the file stem.
std::string DefaultName(const std::filesystem::path& path) {
  const std::string parent = path.parent_path().filename().string();
  if (path.filename() == "config.json" && !parent.empty() && parent != ".") return parent;
  return path.stem().string();
}

// The attention and dense-FFN fields every llama-style type shares.
ModelSpec FromLlama(const JsonFields& f) {
  ModelSpec m;
  m.block = BlockKind::kLlama;
  m.hidden = f.Int("hidden_size");
  m.ffn_hidden = f.Int("intermediate_size");
  m.heads = f.Int("num_attention_heads");
  m.kv_heads = f.Int("num_key_value_heads", m.heads);
  m.layers = f.Int("num_hidden_layers");
  m.vocab_size = f.Int("vocab_size");
  m.tied_embeddings = f.Bool("tie_word_embeddings", false);
  m.max_seq = f.Has("max_position_embeddings") ? f.Int("max_position_embeddings") : 0;
  if (f.Has("head_dim"))
    m.attention_head_dim = config_internal::ExplicitHeadDim(f.Int("head_dim"), m.hidden, m.heads);
  return m;
}

// A field a mixture-of-experts config needs: missing, it names the type and what it means.
int64_t MoeInt(const JsonFields& f, const std::string& type, const char* key, const char* what) {
  if (!f.Has(key))
    f.Fail(key, "missing; a " + type + " config.json (mixture of experts) needs " + key + ": " +
                    what);
  return f.Int(key);
}

// A field that must hold one value meshplan can describe (a layer pattern).
void RequireValue(const JsonFields& f, const char* key, int64_t expected, const char* why) {
  if (f.Has(key) && f.Int(key) != expected)
    f.Fail(key, fmt::format("value {} is not supported; expected {} ({})", f.Int(key), expected, why));
}

ModelSpec FromMixtral(const JsonFields& f) {
  ModelSpec m = FromLlama(f);
  m.moe.experts = MoeInt(f, "mixtral", "num_local_experts", "the experts per layer, >= 1");
  m.moe.top_k = MoeInt(f, "mixtral", "num_experts_per_tok",
                       "the experts each token is routed to, 1 <= k <= num_local_experts");
  m.moe.expert_ffn_hidden = m.ffn_hidden;  // every layer is sparse; experts are F wide
  return m;
}

ModelSpec FromQwen3(const JsonFields& f, bool moe) {
  ModelSpec m = FromLlama(f);
  m.qk_norm = true;  // Qwen3Attention: q_norm, k_norm (RMSNorm over head_dim)
  if (!moe) return m;
  m.moe.experts = MoeInt(f, "qwen3_moe", "num_experts", "the experts per layer, >= 1");
  m.moe.top_k = MoeInt(f, "qwen3_moe", "num_experts_per_tok",
                       "the experts each token is routed to, 1 <= k <= num_experts");
  m.moe.expert_ffn_hidden =
      MoeInt(f, "qwen3_moe", "moe_intermediate_size", "the FFN width of each expert, >= 1");
  RequireValue(f, "decoder_sparse_step", 1, "every layer a MoE layer");
  const auto& root = f.object();
  if (root.contains("mlp_only_layers") && !root.at("mlp_only_layers").is_null() &&
      !(root.at("mlp_only_layers").is_array() && root.at("mlp_only_layers").empty()))
    f.Fail("mlp_only_layers", "dense layers among the sparse ones are not supported; expected [] "
                              "(meshplan describes the first dense_layers layers as dense, the "
                              "rest as MoE)");
  return m;
}

ModelSpec FromDeepSeek(const JsonFields& f, const std::string& type) {
  ModelSpec m = FromLlama(f);
  m.moe.experts = MoeInt(f, type, "n_routed_experts", "the routed experts per MoE layer, >= 1");
  m.moe.top_k = MoeInt(f, type, "num_experts_per_tok",
                       "the experts each token is routed to, 1 <= k <= n_routed_experts");
  m.moe.expert_ffn_hidden =
      MoeInt(f, type, "moe_intermediate_size", "the FFN width of each expert, >= 1");
  m.moe.shared_experts = f.Count("n_shared_experts", 0);
  m.moe.dense_layers = f.Count("first_k_dense_replace", 0);
  RequireValue(f, "moe_layer_freq", 1, "every layer after the first dense ones a MoE layer");
  m.moe.router_bias = f.String("topk_method", "") == "noaux_tc";  // e_score_correction_bias
  // Multi-head latent attention: q/k heads of nope + rope, v heads of their own width.
  m.mla.kv_lora_rank = MoeInt(f, type, "kv_lora_rank", "the kv latent rank (MLA), >= 1");
  m.mla.q_lora_rank = f.Count("q_lora_rank", 0);  // null: a full-rank Wq (DeepSeek-V2-Lite)
  m.mla.rope_head_dim = MoeInt(f, type, "qk_rope_head_dim", "the RoPE part of a q/k head, >= 1");
  m.mla.v_head_dim = MoeInt(f, type, "v_head_dim", "the value head width, >= 1");
  const int64_t nope = MoeInt(f, type, "qk_nope_head_dim", "the non-RoPE part of a q/k head, >= 1");
  m.attention_head_dim = config_internal::ExplicitHeadDim(nope + m.mla.rope_head_dim, m.hidden, m.heads);
  return m;
}

// NemotronForCausalLM (transformers models/nemotron): NemotronMLP is down_proj(act(up_proj x)),
// no gate; its config's hidden_act defaults to relu2. LayerNorm1p and partial RoPE cost as
// RMSNorm and full RoPE (docs/cost_model.md section 1).
ModelSpec FromNemotron(const JsonFields& f) {
  ModelSpec m = FromLlama(f);
  const std::string act = f.String("hidden_act", "relu2");
  if (act != "relu2")
    f.Fail("hidden_act", "'" + act + "' is not supported for model_type nemotron; expected relu2 "
                         "(a squared-ReLU FFN)");
  m.ffn_activation = FfnActivation::kSquaredRelu;
  return m;
}

ModelSpec FromGpt2(const JsonFields& f) {
  ModelSpec m;
  m.block = BlockKind::kGpt;
  m.hidden = f.Int("n_embd");
  m.layers = f.Int("n_layer");
  m.heads = f.Int("n_head");
  m.kv_heads = m.heads;
  m.ffn_hidden = f.Int("n_inner", 4 * m.hidden);  // null or absent: 4 * E
  m.vocab_size = f.Int("vocab_size");
  m.tied_embeddings = f.Bool("tie_word_embeddings", true);
  m.max_seq = f.Has("n_positions") ? f.Int("n_positions") : f.Int("n_ctx");
  return m;
}

// Our field name -> the config.json key it came from, for shape errors.
std::string HfKey(const std::string& field, BlockKind block, const std::string& type) {
  const bool gpt = block == BlockKind::kGpt;
  const bool deepseek = type.rfind("deepseek", 0) == 0;
  if (field == "hidden") return gpt ? "n_embd" : "hidden_size";
  if (field == "layers") return gpt ? "n_layer" : "num_hidden_layers";
  if (field == "heads") return gpt ? "n_head" : "num_attention_heads";
  if (field == "ffn_hidden") return gpt ? "n_inner" : "intermediate_size";
  if (field == "moe.experts")
    return type == "mixtral" ? "num_local_experts" : deepseek ? "n_routed_experts" : "num_experts";
  if (field == "mla.q_lora_rank") return "q_lora_rank";
  if (field == "mla.kv_lora_rank") return "kv_lora_rank";
  if (field == "kv_heads") return gpt ? "n_head" : "num_key_value_heads";
  if (field == "max_seq") return gpt ? "n_positions" : "max_position_embeddings";
  if (field == "head_dim") return deepseek ? "qk_nope_head_dim" : "head_dim";
  if (field == "moe.top_k") return "num_experts_per_tok";
  if (field == "moe.dense_layers") return "first_k_dense_replace";
  if (field == "moe.shared_experts") return "n_shared_experts";
  if (field == "moe.expert_ffn_hidden")
    return type == "mixtral" ? "intermediate_size" : "moe_intermediate_size";
  if (field == "mla.rope_head_dim") return "qk_rope_head_dim";
  if (field == "mla.v_head_dim") return "v_head_dim";
  return field;
}

ModelSpec FromHfJson(const json& root, const std::string& file) {
  if (!root.is_object())
    throw InputError({file}, "", "expected a JSON object (a Hugging Face config.json)");
  const JsonFields f(root, file);
  std::string type = f.String("model_type", "");
  if (type.empty()) type = root.contains("n_embd") ? "gpt2" : "llama";  // infer from the keys
  const bool moe_type = type == "mixtral" || type == "qwen3_moe" || type == "deepseek_v2" ||
                        type == "deepseek_v3";
  const bool dense_type = type == "llama" || type == "mistral" || type == "qwen2" ||
                          type == "qwen3" || type == "nemotron" || type == "gpt2";
  if (!moe_type && !dense_type)
    f.Fail("model_type", "unsupported model_type '" + type + "'; supported: " + kSupportedTypes);
  if (dense_type)
    for (const char* key : kMoeKeys)
      if (f.Has(key))
        f.Fail(key, "a mixture-of-experts field in a config.json of model_type '" + type +
                        "', which meshplan reads as a dense model; expected model_type mixtral, "
                        "qwen3_moe, deepseek_v2 or deepseek_v3 for a mixture of experts");
  ModelSpec m;
  if (type == "llama" || type == "mistral" || type == "qwen2")
    m = FromLlama(f);
  else if (type == "qwen3" || type == "qwen3_moe")
    m = FromQwen3(f, type == "qwen3_moe");
  else if (type == "nemotron")
    m = FromNemotron(f);
  else if (type == "mixtral")
    m = FromMixtral(f);
  else if (type == "deepseek_v2" || type == "deepseek_v3")
    m = FromDeepSeek(f, type);
  else
    m = FromGpt2(f);

  m.name = f.String("_name_or_path", "");
  if (m.name.empty()) m.name = DefaultName(file);
  if (auto problem = config_internal::CheckModelShape(m))
    f.Fail(HfKey(problem->field, m.block, type), problem->message);
  return m;
}

}  // namespace

ModelSpec HfConfigFromText(const std::string& text, const std::string& file) {
  try {
    return FromHfJson(ParseJson(text, file), file);
  } catch (const InputError& e) {
    throw LocatedInJson(e, text);  // a field's error gets the line and column of its value
  }
}

ModelSpec LoadHfConfig(const std::string& path) {
  return HfConfigFromText(ReadInputFile(path, "model"), path);
}

}  // namespace meshplan
