// Rendezvous: the c10d::Store through which the ranks of one run find each other.
//
// ConnectRendezvousStore follows torch.distributed's env:// rule: under an agent
// store (torchrun, or `meshplan run --nproc N`) every rank is a TCPStore client of
// the launcher's server and works under "/worker/attempt_<restart_count>";
// otherwise rank 0 hosts the TCPStore at MASTER_ADDR:MASTER_PORT. Every store
// operation waits at most `timeout`; failing to connect throws std::runtime_error
// naming the address, the time really waited and what listens there (nothing, or something
// that is not a store it can speak to).
// StoreServer is the launcher's side: a TCPStore server on a free port, alive for
// the lifetime of the object.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "executor/comm/gloo_communicator.h"
#include "executor/launch/rank_env.h"

namespace meshplan {

c10::intrusive_ptr<c10d::Store> ConnectRendezvousStore(const RankEnv& env,
                                                       std::chrono::milliseconds timeout);

// Gloo endpoint options for a rank: GLOO_SOCKET_IFNAME picks the interface (as in
// PyTorch); a loopback MASTER_ADDR binds 127.0.0.1; otherwise the host name's address.
GlooOptions GlooOptionsForRank(const RankEnv& env, std::chrono::milliseconds timeout,
                               const EnvLookup& lookup = ProcessEnv());

class StoreServer {
 public:
  // Listens on `host`:`port` (port 0: any free port). Throws std::runtime_error.
  explicit StoreServer(const std::string& host = "127.0.0.1", uint16_t port = 0,
                       std::chrono::milliseconds timeout = std::chrono::seconds(60));
  ~StoreServer();
  uint16_t port() const;
  c10::intrusive_ptr<c10d::Store> store() const;  // the server's own client

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  uint16_t port_ = 0;
};

}  // namespace meshplan
