// Token files as bytes (see token_file.h).
#include "executor/token_file.h"

#include <fmt/format.h>

#include <algorithm>

#include "planner/input_error.h"

namespace meshplan {

TokenDtype ParseTokenDtype(const std::string& name, const std::string& field) {
  if (name == "uint16") return TokenDtype::kUint16;
  if (name == "uint32") return TokenDtype::kUint32;
  throw InputError({"<command line>"}, field, "'" + name + "' is not one of: uint16, uint32");
}

int TokenBytes(TokenDtype dtype) { return dtype == TokenDtype::kUint16 ? 2 : 4; }

int64_t TokenFileWindows(int64_t file_bytes, TokenDtype dtype, int64_t seq_len,
                         int64_t min_sequences, const std::string& path) {
  const int width = TokenBytes(dtype);
  const char* dtype_name = dtype == TokenDtype::kUint16 ? "uint16" : "uint32";
  if (file_bytes < 0 || seq_len < 1)
    throw InputError({path}, "--data", fmt::format("{} bytes, windows of {} + 1 ids: nothing to read",
                                                   file_bytes, seq_len));
  if (file_bytes % width != 0)
    throw InputError({path}, "--data",
                     fmt::format("{} bytes is not a whole number of {} ids ({} bytes each); "
                                 "wrong --data-dtype?",
                                 file_bytes, dtype_name, width));
  const int64_t tokens = file_bytes / width;
  const int64_t windows = tokens / (seq_len + 1);
  if (windows < std::max<int64_t>(min_sequences, 1))
    throw InputError({path}, "--data",
                     fmt::format("too short: {} tokens make {} sequences of {} tokens; one global "
                                 "batch needs {}",
                                 tokens, windows, seq_len + 1, std::max<int64_t>(min_sequences, 1)));
  return windows;
}

void DecodeTokenIds(const unsigned char* bytes, int64_t count, TokenDtype dtype, int64_t vocab,
                    int64_t first_token, const std::string& path, int64_t* out) {
  const int width = TokenBytes(dtype);
  for (int64_t t = 0; t < count; ++t) {
    const unsigned char* p = bytes + t * width;
    uint32_t id = 0;
    for (int b = width - 1; b >= 0; --b) id = (id << 8) | p[b];  // little-endian
    if (static_cast<int64_t>(id) >= vocab)
      throw InputError({path}, "--data",
                       fmt::format("token {} is {}, outside the model's vocabulary 0..{} (wrong "
                                   "--data-dtype?)",
                                   first_token + t, id, vocab - 1));
    out[t] = id;
  }
}

}  // namespace meshplan
