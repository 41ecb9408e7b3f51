// Argument checks shared by every Communicator implementation (Gloo, single-rank,
// NCCL), so each collective rejects the same mistakes with the same message.
//
// Each function throws std::invalid_argument naming the operation, the group and
// the offending sizes; it returns normally when the arguments satisfy the
// contract of executor/comm/communicator.h.
#pragma once

#include <torch/types.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace meshplan::comm_checks {

inline std::string Describe(const torch::Tensor& t) {
  if (!t.defined()) return "an undefined tensor";
  return std::string(c10::toString(t.scalar_type())) + "[" + std::to_string(t.numel()) + "]";
}

inline void CheckBuffer(const char* op, const std::string& group, const torch::Tensor& t,
                        const char* what) {
  if (!t.defined())
    throw std::invalid_argument(std::string(op) + " on group '" + group + "': " + what +
                                " is undefined");
  if (!t.is_contiguous())
    throw std::invalid_argument(std::string(op) + " on group '" + group + "': " + what +
                                " must be contiguous");
}

inline void CheckSameKind(const char* op, const std::string& group, const torch::Tensor& a,
                          const torch::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.device() != b.device())
    throw std::invalid_argument(std::string(op) + " on group '" + group +
                                "': input and output differ in dtype or device (" + Describe(a) +
                                " on " + a.device().str() + " vs " + Describe(b) + " on " +
                                b.device().str() + ")");
}

// output.numel() == input.numel() * group_size (in rank order).
inline void CheckAllGather(const std::string& group, int group_size, const torch::Tensor& input,
                           const torch::Tensor& output) {
  CheckBuffer("all_gather", group, input, "input");
  CheckBuffer("all_gather", group, output, "output");
  CheckSameKind("all_gather", group, input, output);
  if (output.numel() != input.numel() * group_size)
    throw std::invalid_argument("all_gather on group '" + group + "': output " +
                                Describe(output) + " must hold size()=" +
                                std::to_string(group_size) + " x input " + Describe(input));
}

// input.numel() == output.numel() * group_size.
inline void CheckReduceScatter(const std::string& group, int group_size,
                               const torch::Tensor& input, const torch::Tensor& output) {
  CheckBuffer("reduce_scatter", group, input, "input");
  CheckBuffer("reduce_scatter", group, output, "output");
  CheckSameKind("reduce_scatter", group, input, output);
  if (input.numel() != output.numel() * group_size)
    throw std::invalid_argument("reduce_scatter on group '" + group + "': input " +
                                Describe(input) + " must hold size()=" +
                                std::to_string(group_size) + " x output " + Describe(output));
}

// 0 <= peer < group_size and peer != self (what: "root", "dst", "src").
inline void CheckPeer(const char* op, const std::string& group, int group_size, int self,
                      int peer, const char* what, bool allow_self) {
  if (peer < 0 || peer >= group_size)
    throw std::invalid_argument(std::string(op) + " on group '" + group + "': " + what + "=" +
                                std::to_string(peer) + " is outside 0.." +
                                std::to_string(group_size - 1));
  if (!allow_self && peer == self)
    throw std::invalid_argument(std::string(op) + " on group '" + group + "': " + what + "=" +
                                std::to_string(peer) + " is this rank itself");
}

// Variable all-to-all along dim 0 (communicator.h AllToAllAsync): one split per rank,
// none negative, the rows summing to each tensor's dim 0, the other dims equal.
inline void CheckAllToAll(const std::string& group, int group_size, const torch::Tensor& input,
                          const std::vector<int64_t>& send_rows, const torch::Tensor& output,
                          const std::vector<int64_t>& recv_rows) {
  const char* op = "all_to_all";
  CheckBuffer(op, group, input, "input");
  CheckBuffer(op, group, output, "output");
  CheckSameKind(op, group, input, output);
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument(std::string(op) + " on group '" + group + "': " + why);
  };
  if (static_cast<int>(send_rows.size()) != group_size ||
      static_cast<int>(recv_rows.size()) != group_size)
    fail("send_rows and recv_rows need size()=" + std::to_string(group_size) + " entries, got " +
         std::to_string(send_rows.size()) + " and " + std::to_string(recv_rows.size()));
  if (input.dim() < 1 || output.dim() != input.dim() ||
      input.sizes().slice(1) != output.sizes().slice(1))
    fail("input " + Describe(input) + " and output " + Describe(output) +
         " must be rows of the same shape");
  int64_t sent = 0, received = 0;
  for (int j = 0; j < group_size; ++j) {
    if (send_rows[j] < 0 || recv_rows[j] < 0) fail("a negative row count");
    sent += send_rows[j];
    received += recv_rows[j];
  }
  if (sent != input.size(0) || received != output.size(0))
    fail("send_rows sum to " + std::to_string(sent) + " (input has " +
         std::to_string(input.size(0)) + " rows), recv_rows to " + std::to_string(received) +
         " (output has " + std::to_string(output.size(0)) + ")");
}

}  // namespace meshplan::comm_checks
