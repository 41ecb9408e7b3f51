#include "executor/comm/rendezvous.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <stdexcept>

namespace meshplan {
namespace {

std::string CauseOf(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e))
    return c10_error->what_without_backtrace();
  return e.what();
}

}  // namespace

c10::intrusive_ptr<c10d::Store> ConnectRendezvousStore(const RankEnv& env,
                                                       std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(env.master_port);
  options.isServer = !env.agent_store && env.rank == 0;
  options.numWorkers = env.world_size;
  options.waitWorkers = false;
  options.timeout = timeout;
  try {
    auto store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
    if (!env.agent_store) return store;
    return c10::make_intrusive<c10d::PrefixStore>(
        "/worker/attempt_" + std::to_string(env.restart_count), store);
  } catch (const std::exception& e) {
    throw std::runtime_error("rank " + std::to_string(env.rank) + ": cannot " +
                             (options.isServer ? "host" : "reach") +
                             " the rendezvous store at " + env.master_addr + ":" +
                             std::to_string(env.master_port) + " (" + env.source +
                             " environment): " + CauseOf(e));
  }
}

GlooOptions GlooOptionsForRank(const RankEnv& env, std::chrono::milliseconds timeout,
                               const EnvLookup& lookup) {
  GlooOptions options;
  options.timeout = timeout;
  if (const char* ifname = lookup("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname != '\0') {
    options.interface = ifname;
    options.hostname.clear();
  } else if (IsLoopbackAddress(env.master_addr)) {
    options.hostname = "127.0.0.1";
  } else {
    options.hostname.clear();  // bind to the address this host's name resolves to
  }
  return options;
}

StoreServer::StoreServer(const std::string& host, uint16_t port,
                         std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = port;
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = timeout;
  try {
    auto store = c10::make_intrusive<c10d::TCPStore>(host, options);
    port_ = store->getPort();
    store_ = store;
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot start the rendezvous store on " + host + ":" +
                             std::to_string(port) + ": " + CauseOf(e));
  }
}

StoreServer::~StoreServer() = default;

uint16_t StoreServer::port() const { return port_; }

c10::intrusive_ptr<c10d::Store> StoreServer::store() const { return store_; }

}  // namespace meshplan
