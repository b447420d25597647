#include "launch/rendezvous_store.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "launch/tcp_store.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

// Whether `host` names an address of this machine: only then can a store bound here be reached there.
bool is_local_address(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return false;
  bool local = false;
  for (addrinfo* a = found; a && !local; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, 0);
    if (fd < 0) continue;
    local = ::bind(fd, a->ai_addr, a->ai_addrlen) == 0;  // port 0: the address alone is tested
    ::close(fd);
  }
  freeaddrinfo(found);
  return local;
}

c10d::TCPStoreOptions store_options(const LaunchOptions& o, bool server, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions s;
  s.port = static_cast<uint16_t>(o.master_port);
  s.isServer = server;
  s.waitWorkers = false;
  s.timeout = timeout;
  return s;
}

}  // namespace

RendezvousStore open_rendezvous_store(const LaunchOptions& o) {
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.rdzv_timeout_s * 1000));
  const auto deadline = Clock::now() + timeout;
  const bool local = is_local_address(o.master_addr);
  std::string last_error;
  for (;;) {
    try {
      // A short connect, so that a store nobody hosts is taken over soon; the usual timeout after.
      auto store = open_tcp_store(o.master_addr, store_options(o, false, std::chrono::milliseconds(1000)));
      store->setTimeout(timeout);
      return {store, false};
    } catch (const std::exception& e) {
      last_error = e.what();
    }
    if (local) {
      try {
        return {open_tcp_store(o.master_addr, store_options(o, true, timeout)), true};
      } catch (const std::exception& e) {
        last_error = e.what();  // another agent bound it first: connect to it on the next try
      }
    }
    if (Clock::now() > deadline)
      throw std::runtime_error("waited " + std::to_string(static_cast<int>(o.rdzv_timeout_s)) +
                               "s (--rdzv-timeout) for the rendezvous store at " + o.master_addr + ":" +
                               std::to_string(o.master_port) + " (--master-addr, --master-port)" +
                               (local ? "" : ", which only an agent on that host can serve") + ": " + last_error);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace dtrain
