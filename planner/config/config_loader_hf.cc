// Hugging Face config.json -> ModelSpec (LoadHfConfig in planner/config/config_loader.h).
//
// Llama-style model types (llama, mistral, qwen2) map to block llama; gpt2 maps to
// block gpt with F = 4E (n_inner when given) and tied embeddings. Fields the
// planner does not model (rope scaling, sliding windows, dropout, ...) are ignored;
// qwen2's q/k/v biases are not counted (a few hundred thousand parameters).
// Errors name the file and the JSON key; JSON syntax errors carry line:column.
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "planner/config/config_loader.h"
#include "planner/config/config_loader_internal.h"
#include "planner/input_error.h"

namespace meshplan {
namespace {

using nlohmann::json;

constexpr const char* kSupportedTypes = "llama, mistral, qwen2 (block llama), gpt2 (block gpt)";

// 1-based line and column of byte offset `byte` (1-based, as nlohmann reports it).
InputLocation LocationOfByte(const std::string& file, const std::string& text, size_t byte) {
  InputLocation where{file, 1, 1};
  const size_t end = std::min(byte > 0 ? byte - 1 : 0, text.size());
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++where.line;
      where.column = 1;
    } else {
      ++where.column;
    }
  }
  return where;
}

// Typed reads of one JSON object, naming the file and the key on error.
class JsonFields {
 public:
  JsonFields(const json& object, std::string file) : object_(object), file_(std::move(file)) {}

  bool Has(const char* key) const { return object_.contains(key) && !object_.at(key).is_null(); }

  int64_t Int(const char* key) const {
    if (!Has(key)) Fail(key, "missing required field; expected a positive integer");
    const json& v = object_.at(key);
    if (!v.is_number_integer())
      Fail(key, "expected a positive integer (at most 1e15), got " + v.dump());
    // nlohmann keeps non-negative integers as unsigned and negative ones as signed.
    const bool in_range = v.is_number_unsigned()
                              ? v.get<uint64_t>() >= 1 &&
                                    v.get<uint64_t>() <= static_cast<uint64_t>(kMaxConfigInt)
                              : v.get<int64_t>() >= 1 && v.get<int64_t>() <= kMaxConfigInt;
    if (!in_range)
      Fail(key, "value " + v.dump() + " is out of range; expected a positive integer (at most 1e15)");
    return v.get<int64_t>();
  }
  int64_t Int(const char* key, int64_t fallback) const { return Has(key) ? Int(key) : fallback; }

  bool Bool(const char* key, bool fallback) const {
    if (!Has(key)) return fallback;
    const json& v = object_.at(key);
    if (!v.is_boolean()) Fail(key, "expected true or false, got " + v.dump());
    return v.get<bool>();
  }

  std::string String(const char* key, const std::string& fallback) const {
    if (!Has(key)) return fallback;
    const json& v = object_.at(key);
    if (!v.is_string()) Fail(key, "expected a string, got " + v.dump());
    return v.get<std::string>();
  }

  [[noreturn]] void Fail(const std::string& key, const std::string& message) const {
    throw InputError({file_}, key, message);
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
  if (f.Has("head_dim") && f.Int("head_dim") * m.heads != m.hidden)
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

}  // namespace

ModelSpec LoadHfConfig(const std::string& path_text) {
  const std::filesystem::path path(path_text);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw InputError({path_text}, "", "no such file");
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();

  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    throw InputError(LocationOfByte(path_text, text, e.byte), "",
                     std::string("malformed JSON: ") + e.what());
  }
  if (!root.is_object())
    throw InputError({path_text}, "", "expected a JSON object (a Hugging Face config.json)");

  const JsonFields f(root, path_text);
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
  if (m.name.empty()) m.name = DefaultName(path);
  if (auto problem = config_internal::CheckModelShape(m))
    f.Fail(HfKey(problem->field, m.block), problem->message);
  return m;
}

}  // namespace meshplan
