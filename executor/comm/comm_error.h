// CommError: a communication call failed because of the group rather than this rank's own
// work: a peer died or closed its connection, a wait timed out, the group could not be
// joined, or an earlier such failure broke the group. The Gloo and NCCL communicators throw
// it (a std::runtime_error, as executor/comm/communicator.h promises); `meshplan run`
// reports it to the launcher as a failure caused by a peer (executor/launch/rank_status.h),
// so the run names the rank that failed first on its own, not the ones left waiting.
#pragma once

#include <stdexcept>

namespace meshplan {

class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace meshplan
