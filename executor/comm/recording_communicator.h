// RecordingCommunicator: a Communicator that forwards every call to another one and first
// appends a line describing it to a CommLog, so two runs of one rank (real peers, emulated
// peers) can be shown to issue the same communication (`meshplan run --comm-log`).
//
// A line is "<group> <op> [peer] <tensor>...": the group's name, the operation (all_reduce,
// reduce_scatter, all_gather, broadcast, send, recv, barrier), the root / dst / src where
// there is one, and each tensor as dtype[shape] (input before output), e.g.
//   tp all_gather float[2,16,64] -> float[2,2,16,64]
// Values are not recorded. A timed log (CommLog::timed, `meshplan run --comm-timing`) also
// keeps when each call was issued, when the issuing call returned (on CPU ranks, whose
// collectives complete at post, the time between is the collective) and when it was known
// complete (its Wait() or a Test() that said so returned; -1 if never), in seconds since the
// log's start. What the wrapped communicator returns or throws passes through unchanged.
// Not thread-safe: one rank's thread appends, like every Communicator.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "executor/comm/communicator.h"
#include "executor/parallel/device_mesh.h"

namespace meshplan {

// When one call was issued, returned and was known complete, in seconds since the log's start.
struct CommTiming {
  double issued_s = 0;
  double returned_s = 0;
  double done_s = -1;  // -1: its completion was never waited for
};

// One rank's communicator calls, in issue order.
struct CommLog {
  std::vector<std::string> lines;
  bool timed = false;               // also fill `times`, one per line
  std::vector<CommTiming> times;
  double start_s = -1;              // steady-clock seconds of the first call (-1: none yet)
};

// The log as text: one line per call; a timed log appends
// "issued_ms=... returned_ms=... done_ms=...".
std::string CommLogText(const CommLog& log);

class RecordingCommunicator final : public Communicator {
 public:
  // `log` must outlive this communicator.
  RecordingCommunicator(std::unique_ptr<Communicator> inner, std::string name, CommLog& log);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }

  std::unique_ptr<CommHandle> AllReduceSumAsync(torch::Tensor& buffer) override;
  std::unique_ptr<CommHandle> ReduceScatterSumAsync(const torch::Tensor& input,
                                                    torch::Tensor& output) override;
  std::unique_ptr<CommHandle> AllGatherAsync(const torch::Tensor& input,
                                             torch::Tensor& output) override;
  std::unique_ptr<CommHandle> BroadcastAsync(torch::Tensor& buffer, int root) override;
  std::unique_ptr<CommHandle> SendAsync(const torch::Tensor& buffer, int dst) override;
  std::unique_ptr<CommHandle> RecvAsync(torch::Tensor& buffer, int src) override;
  std::unique_ptr<CommHandle> AllToAllAsync(const torch::Tensor& input,
                                            const std::vector<int64_t>& send_rows,
                                            torch::Tensor& output,
                                            const std::vector<int64_t>& recv_rows) override;
  void Barrier() override;

 private:
  // Appends the call's line (and its issue time); returns its index in the log.
  size_t Record(const std::string& op, const std::string& detail);
  // `handle`, made to stamp the call's completion in a timed log; stamps its return.
  std::unique_ptr<CommHandle> Timed(std::unique_ptr<CommHandle> handle, size_t call);

  std::unique_ptr<Communicator> inner_;
  std::string name_;
  CommLog& log_;
};

// "float[2,16,64]"
std::string DescribeTensor(const torch::Tensor& t);

// Wraps every group `inner` makes in a RecordingCommunicator appending to `log` (which must
// outlive the communicators).
GroupFactory RecordingGroupFactory(GroupFactory inner, CommLog& log);

}  // namespace meshplan
