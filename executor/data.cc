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
  FileTokens(std::string path, int fd, int width, int64_t windows, int64_t vocab, int64_t seq_len)
      : path_(std::move(path)), fd_(fd), width_(width), windows_(windows), vocab_(vocab),
        seq_len_(seq_len) {}
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
    for (int64_t t = 0; t < count; ++t) {
      const unsigned char* p = bytes.data() + t * width_;
      uint32_t id = 0;
      for (int b = width_ - 1; b >= 0; --b) id = (id << 8) | p[b];  // little-endian
      if (static_cast<int64_t>(id) >= vocab_)
        throw InputError({path_}, "--data",
                         "token " + std::to_string(first + t) + " is " + std::to_string(id) +
                             ", outside the model's vocabulary 0.." + std::to_string(vocab_ - 1) +
                             " (wrong --data-dtype?)");
      out[t] = id;
    }
  }
  int64_t seq_len() const override { return seq_len_; }

 private:
  std::string path_;
  int fd_;
  int width_;
  int64_t windows_, vocab_, seq_len_;
};

}  // namespace

std::unique_ptr<TokenSource> MakeSyntheticTokens(uint64_t seed, int64_t vocab, int64_t seq_len) {
  return std::make_unique<SyntheticTokens>(seed, vocab, seq_len);
}

TokenDtype ParseTokenDtype(const std::string& name, const std::string& field) {
  if (name == "uint16") return TokenDtype::kUint16;
  if (name == "uint32") return TokenDtype::kUint32;
  throw InputError({"<command line>"}, field, "'" + name + "' is not one of: uint16, uint32");
}

std::unique_ptr<TokenSource> OpenTokenFile(const std::string& path, TokenDtype dtype,
                                           int64_t vocab, int64_t seq_len, int64_t min_sequences) {
  const int width = dtype == TokenDtype::kUint16 ? 2 : 4;
  const char* dtype_name = dtype == TokenDtype::kUint16 ? "uint16" : "uint32";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw InputError({path}, "--data", "cannot open the token file: " + std::string(std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError({path}, "--data", "not a regular file");
  }
  const int64_t bytes = static_cast<int64_t>(st.st_size);
  if (bytes % width != 0) {
    ::close(fd);
    throw InputError({path}, "--data",
                     std::to_string(bytes) + " bytes is not a whole number of " + dtype_name +
                         " ids (" + std::to_string(width) + " bytes each); wrong --data-dtype?");
  }
  const int64_t windows = bytes / width / (seq_len + 1);
  if (windows < std::max<int64_t>(min_sequences, 1)) {
    ::close(fd);
    throw InputError({path}, "--data",
                     "too short: " + std::to_string(bytes / width) + " tokens make " +
                         std::to_string(windows) + " sequences of " + std::to_string(seq_len + 1) +
                         " tokens; one global batch needs " + std::to_string(min_sequences));
  }
  return std::make_unique<FileTokens>(path, fd, width, windows, vocab, seq_len);
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
