// Fuzz target: a token file (executor/token_file.h) as `meshplan run --data` reads it. The
// first 4 bytes choose the reading (id width, sequence length, vocabulary, sequences one
// batch needs); the rest is the file: its size checked, then every window decoded. No
// LibTorch.
#include <vector>

#include "executor/token_file.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const meshplan::TokenDtype dtype = (data[0] & 1) ? meshplan::TokenDtype::kUint32
                                                   : meshplan::TokenDtype::kUint16;
  const int64_t seq_len = 1 + data[1] % 64;
  const int64_t vocab = 1 + ((data[2] << 8 | data[3]) << (data[0] & 2 ? 8 : 0));
  const int64_t min_sequences = data[0] >> 4;
  return meshplan::fuzz::RunOnText(data + 4, size - 4, [&](const std::string& file) {
    const std::string path = "fuzz/tokens.bin";
    const int64_t windows = meshplan::TokenFileWindows(static_cast<int64_t>(file.size()), dtype,
                                                       seq_len, min_sequences, path);
    const int64_t width = meshplan::TokenBytes(dtype);
    std::vector<int64_t> ids(static_cast<size_t>(seq_len + 1));
    for (int64_t w = 0; w < windows; ++w) {
      const int64_t first = w * (seq_len + 1);
      meshplan::DecodeTokenIds(reinterpret_cast<const unsigned char*>(file.data()) + first * width,
                               seq_len + 1, dtype, vocab, first, path, ids.data());
    }
  });
}
