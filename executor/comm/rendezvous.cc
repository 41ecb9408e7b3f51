#include "executor/comm/rendezvous.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <fmt/format.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace meshplan {
namespace {

std::string CauseOf(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e))
    return c10_error->what_without_backtrace();
  return e.what();
}

// What is at host:port now, asked with one plain TCP connect (after a store client failed):
// nothing listening, something that is not a store we can speak to, or why it cannot be asked.
std::string WhatListens(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int error = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
      error != 0)
    return std::string("the address does not resolve (") + ::gai_strerror(error) + ")";
  std::string what = "no address to connect to";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    const int connected = ::connect(fd, a->ai_addr, a->ai_addrlen);
    const int why = errno;
    ::close(fd);
    if (connected == 0) {
      what = "something listens there but does not answer as a c10d TCPStore (another program, "
             "or a store of another protocol version)";
      break;
    }
    what = why == ECONNREFUSED ? "nothing listens there (connection refused)"
                               : std::string("connecting fails: ") + std::strerror(why);
  }
  ::freeaddrinfo(found);
  return what;
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
  const auto start = std::chrono::steady_clock::now();
  try {
    auto store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
    if (!env.agent_store) return store;
    return c10::make_intrusive<c10d::PrefixStore>(
        "/worker/attempt_" + std::to_string(env.restart_count), store);
  } catch (const std::exception& e) {
    const double waited_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string where = env.master_addr + ":" + std::to_string(env.master_port);
    const std::string what = options.isServer ? "" : WhatListens(env.master_addr, env.master_port) + "; ";
    throw std::runtime_error(fmt::format(
        "rank {}: cannot {} the rendezvous store at {} ({} environment) after {:.1f} s of the "
        "{:g} s allowed: {}LibTorch says: {}",
        env.rank, options.isServer ? "host" : "reach", where, env.source, waited_s,
        timeout.count() / 1000.0, what, CauseOf(e)));
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
