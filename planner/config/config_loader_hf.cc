// Hugging Face config.json -> ModelSpec (LoadHfConfig in planner/config/config_loader.h).
//
// Llama-style model types (llama, mistral, qwen2) map to block llama; gpt2 maps to
// block gpt with F = 4E (n_inner when given) and tied embeddings. Fields the
// planner does not model (rope scaling, sliding windows, dropout, ...) are ignored;
// qwen2's q/k/v biases are not counted (a few hundred thousand parameters).
// Errors name the file and the JSON key; JSON syntax errors carry line:column.
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

constexpr const char* kSupportedTypes = "llama, mistral, qwen2 (block llama), gpt2 (block gpt)";

// Typed reads of one JSON object, naming the file and the key on error.
class JsonFields {
 public:
  JsonFields(const json& object, std::string file) : object_(object), file_(std::move(file)) {}

  bool Has(const char* key) const { return object_.contains(key) && !object_.at(key).is_null(); }

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
  if (f.Has("head_dim") && CheckedMul(f.Int("head_dim"), m.heads) != m.hidden)
    f.Fail("head_dim", fmt::format("head_dim={} differs from hidden_size / num_attention_heads = {}; "
                                   "expected them equal (meshplan models D = E / H)",
                                   f.Int("head_dim"), m.hidden / m.heads));
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
std::string HfKey(const std::string& field, BlockKind block) {
  const bool gpt = block == BlockKind::kGpt;
  if (field == "hidden") return gpt ? "n_embd" : "hidden_size";
  if (field == "kv_heads") return gpt ? "n_head" : "num_key_value_heads";
  if (field == "max_seq") return gpt ? "n_positions" : "max_position_embeddings";
  return field;
}

ModelSpec FromHfJson(const json& root, const std::string& file) {
  if (!root.is_object())
    throw InputError({file}, "", "expected a JSON object (a Hugging Face config.json)");
  const JsonFields f(root, file);
  std::string type = f.String("model_type", "");
  if (type.empty()) type = root.contains("n_embd") ? "gpt2" : "llama";  // infer from the keys
  ModelSpec m;
  if (type == "llama" || type == "mistral" || type == "qwen2")
    m = FromLlama(f);
  else if (type == "gpt2")
    m = FromGpt2(f);
  else
    f.Fail("model_type", "unsupported model_type '" + type + "'; supported: " + kSupportedTypes);

  m.name = f.String("_name_or_path", "");
  if (m.name.empty()) m.name = DefaultName(file);
  if (auto problem = config_internal::CheckModelShape(m))
    f.Fail(HfKey(problem->field, m.block), problem->message);
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
