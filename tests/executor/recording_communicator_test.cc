// RecordingCommunicator's timed log (`meshplan run --comm-log PREFIX --comm-timing`): each
// call's issue and completion time, the text lines that carry them, and an untimed log that
// stays the plain list of calls.
#include "tests/executor/rank_threads.h"  // first: LibTorch before Catch2

#include <chrono>
#include <thread>

#include "executor/comm/gloo_communicator.h"
#include "executor/comm/recording_communicator.h"
#include "executor/comm/single_rank_communicator.h"

namespace meshplan {
namespace {

TEST_CASE("an untimed comm log is the list of calls, a timed one adds when each was issued "
          "and completed (-1 when never waited for)",
          "[executor][comm]") {
  torch::Tensor x = torch::zeros({2, 3});
  CommLog plain;
  {
    RecordingCommunicator comm(std::make_unique<SingleRankCommunicator>(), "dp", plain);
    comm.AllReduceSum(x);
    comm.Barrier();
  }
  CHECK(plain.times.empty());
  CHECK(CommLogText(plain) == "dp all_reduce Float[2,3]\ndp barrier\n");

  CommLog timed;
  timed.timed = true;
  {
    RecordingCommunicator comm(std::make_unique<SingleRankCommunicator>(), "dp", timed);
    comm.AllReduceSum(x);
    auto never_waited = comm.AllReduceSumAsync(x);
    comm.Barrier();
  }
  REQUIRE(timed.lines.size() == 3);
  REQUIRE(timed.times.size() == 3);
  CHECK(timed.lines[0] == "dp all_reduce Float[2,3]");  // the same lines as untimed
  CHECK(timed.times[0].issued_s == 0);                   // the log starts at its first call
  CHECK(timed.times[0].returned_s >= timed.times[0].issued_s);
  CHECK(timed.times[0].done_s >= timed.times[0].returned_s);
  CHECK(timed.times[1].done_s == -1);
  CHECK(timed.times[2].done_s == timed.times[2].returned_s);  // a barrier: done when it returns
  CHECK(timed.times[2].done_s >= timed.times[2].issued_s);
  const std::string text = CommLogText(timed);
  CHECK_THAT(text, Catch::StartsWith("dp all_reduce Float[2,3] issued_ms=0.000 returned_ms="));
  CHECK_THAT(text, Catch::Contains("dp all_reduce Float[2,3] issued_ms=") &&
                       Catch::Contains(" done_ms=-1.000\n"));
}

TEST_CASE("a timed comm log says how long a rank waited for a late peer",
          "[executor][comm]") {
  auto store = c10::make_intrusive<c10d::HashStore>();
  store->setTimeout(std::chrono::seconds(60));
  std::vector<CommLog> logs(2);
  test::OnThreads(2, [&](int r) {
    logs[static_cast<size_t>(r)].timed = true;
    RecordingCommunicator comm(
        std::make_unique<GlooCommunicator>(store, r, std::vector<int>{0, 1}, "dp"), "dp",
        logs[static_cast<size_t>(r)]);
    torch::Tensor x = torch::ones({4});
    comm.AllReduceSum(x);  // both present: the log's start
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto handle = comm.AllReduceSumAsync(x);
    handle->Wait();
  });
  // Rank 0 issued its second all-reduce at once and waited for rank 1's 50 ms (in the call
  // or in its Wait: Gloo's default options complete it in the background).
  const CommTiming& second = logs[0].times.at(1);
  CHECK(second.returned_s >= second.issued_s);
  CHECK(second.done_s >= second.returned_s);
  CHECK(second.done_s - second.issued_s >= 0.040);
  // Rank 1 issued it after its sleep and found rank 0 there.
  const CommTiming& late = logs[1].times.at(1);
  CHECK(late.issued_s >= 0.045);
  CHECK(late.done_s - late.issued_s < second.done_s - second.issued_s);
}

}  // namespace
}  // namespace meshplan
