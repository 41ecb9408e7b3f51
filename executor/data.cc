// Synthetic and file token sources, and the per-rank micro-batch (see data.h).
#include "executor/data.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "planner/input_error.h"

namespace meshplan {

namespace {

uint64_t SplitMix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class SyntheticTokens final : public TokenSource {
 public:
  SyntheticTokens(uint64_t seed, int64_t vocab, int64_t seq_len)
      : seed_(seed), vocab_(vocab), seq_len_(seq_len) {}
  void Sequence(int64_t n, int64_t* out) const override {
    const uint64_t h = SplitMix64(seed_ ^ SplitMix64(static_cast<uint64_t>(n)));
    const int64_t start = static_cast<int64_t>(h % static_cast<uint64_t>(vocab_));
    const int64_t stride = 1 + static_cast<int64_t>((h >> 32) % 16);
    for (int64_t t = 0; t <= seq_len_; ++t) out[t] = (start + stride * t) % vocab_;
  }
  int64_t seq_len() const override { return seq_len_; }

 private:
  uint64_t seed_;
  int64_t vocab_, seq_len_;
};

class FileTokens final : public TokenSource {
 public:
  FileTokens(std::string path, int fd, TokenDtype dtype, int64_t windows, int64_t vocab,
             int64_t seq_len)
      : path_(std::move(path)), fd_(fd), dtype_(dtype), width_(TokenBytes(dtype)),
        windows_(windows), vocab_(vocab), seq_len_(seq_len) {}
  ~FileTokens() override { ::close(fd_); }
  void Sequence(int64_t n, int64_t* out) const override {
    const int64_t count = seq_len_ + 1;
    const int64_t first = (n % windows_) * count;  // token index
    std::vector<unsigned char> bytes(static_cast<size_t>(count * width_));
    const off_t offset = static_cast<off_t>(first * width_);
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t got = ::pread(fd_, bytes.data() + done, bytes.size() - done,
                                  offset + static_cast<off_t>(done));
      if (got <= 0)
        throw InputError({path_}, "--data", "read failed at byte " + std::to_string(offset + done) +
                                                (got < 0 ? ": " + std::string(std::strerror(errno))
                                                         : ": unexpected end of file"));
      done += static_cast<size_t>(got);
    }
    DecodeTokenIds(bytes.data(), count, dtype_, vocab_, first, path_, out);
  }
  int64_t seq_len() const override { return seq_len_; }

 private:
  std::string path_;
  int fd_;
  TokenDtype dtype_;
  int width_;
  int64_t windows_, vocab_, seq_len_;
};

}  // namespace

std::unique_ptr<TokenSource> MakeSyntheticTokens(uint64_t seed, int64_t vocab, int64_t seq_len) {
  return std::make_unique<SyntheticTokens>(seed, vocab, seq_len);
}

std::unique_ptr<TokenSource> OpenTokenFile(const std::string& path, TokenDtype dtype,
                                           int64_t vocab, int64_t seq_len, int64_t min_sequences) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw InputError({path}, "--data", "cannot open the token file: " + std::string(std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError({path}, "--data", "not a regular file");
  }
  int64_t windows = 0;
  try {
    windows = TokenFileWindows(static_cast<int64_t>(st.st_size), dtype, seq_len, min_sequences, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  return std::make_unique<FileTokens>(path, fd, dtype, windows, vocab, seq_len);
}

at::Tensor MicroBatchTokens(const TokenSource& source, const BatchShard& shard, int64_t step,
                            int64_t micro_index) {
  const int64_t B = shard.micro_batch, S = source.seq_len();
  at::Tensor ids = at::empty({B, S + 1}, at::kLong);
  int64_t* data = ids.data_ptr<int64_t>();
  const int64_t first = shard.FirstSequence(step, micro_index);
  for (int64_t b = 0; b < B; ++b) source.Sequence(first + b, data + b * (S + 1));
  return ids;
}

}  // namespace meshplan
