// Token files as bytes: flat little-endian uint16 / uint32 token ids, read in windows of
// S+1 ids (executor/data.h). The checks need no LibTorch, so tests/fuzz calls them directly.
// Every refusal is an InputError naming the file and the flag (--data, --data-dtype).
#pragma once

#include <cstdint>
#include <string>

namespace meshplan {

enum class TokenDtype { kUint16, kUint32 };
// "uint16" | "uint32"; anything else throws InputError on field `field`.
TokenDtype ParseTokenDtype(const std::string& name, const std::string& field = "--data-dtype");
int TokenBytes(TokenDtype dtype);  // 2 | 4

// The windows of S+1 = seq_len+1 ids a file of `file_bytes` bytes holds. InputError when
// the size is not a whole number of ids, or the windows are fewer than `min_sequences`
// (what one global batch needs, at least 1).
int64_t TokenFileWindows(int64_t file_bytes, TokenDtype dtype, int64_t seq_len,
                         int64_t min_sequences, const std::string& path);

// Decodes `count` ids from `bytes` (count * TokenBytes(dtype) of them) into `out`, each
// checked to lie in [0, vocab): InputError naming the token's index (first_token + i).
void DecodeTokenIds(const unsigned char* bytes, int64_t count, TokenDtype dtype, int64_t vocab,
                    int64_t first_token, const std::string& path, int64_t* out);

}  // namespace meshplan
