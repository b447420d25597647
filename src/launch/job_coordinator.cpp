#include "launch/job_coordinator.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <unistd.h>

#include <stdexcept>
#include <thread>

#include "common/host_name.h"
#include "common/store_bytes.h"
#include "launch/rendezvous_store.h"
#include "launch/tcp_store.h"
#include "launch/worker_env.h"

namespace dtrain {
namespace {
using Clock = std::chrono::steady_clock;
constexpr auto kBeatInterval = std::chrono::milliseconds(500);

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }
// Where the trainer's rank 0 publishes its run directory (src/train/trainer.cpp, setup_run_dir).
const std::string kRunDirKey = "trainer/run_dir";
}  // namespace

JobCoordinator::JobCoordinator(const LaunchOptions& options)
    : options_(options), node_rank_(options.node_rank), nnodes_(options.nnodes) {
  if (options.elastic) {
    reopen_store();
    return;
  }
  hosts_store_ = node_rank_ == 0;
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(options.master_port);
  o.isServer = options.node_rank == 0;
  o.waitWorkers = false;
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(options.rdzv_timeout_s * 1000));
  c10::intrusive_ptr<c10d::TCPStore> tcp;
  try {
    tcp = open_tcp_store(options.master_addr, o);
  } catch (const std::exception& e) {
    const std::string where = options.master_addr + ":" + std::to_string(options.master_port);
    throw std::runtime_error(
        o.isServer ? "cannot host the rendezvous store on port " + std::to_string(options.master_port) +
                         " (--master-port): " + first_line(e.what())
                   : "waited " + std::to_string(static_cast<int>(options.rdzv_timeout_s)) +
                         "s (--rdzv-timeout) for node 0's rendezvous store at " + where +
                         " (--master-addr, --master-port): " + first_line(e.what()) +
                         "; is node 0's agent running there?");
  }
  port_ = tcp->getPort();
  use_store(tcp);
  claim_node_rank();
  store_->set("nproc/" + std::to_string(options.node_rank), as_bytes(std::to_string(options.nproc_per_node)));
}

void JobCoordinator::use_store(c10::intrusive_ptr<c10d::Store> store) {
  job_store_ = store;
  store_ = c10::make_intrusive<c10d::PrefixStore>("agent", store);
}

void JobCoordinator::reopen_store() {
  RendezvousStore opened = open_rendezvous_store(options_);
  port_ = options_.master_port;
  hosts_store_ = opened.hosting;
  use_store(opened.store);
  rendezvous_ = std::make_unique<ElasticRendezvous>(options_, store_);
  peers_.clear();
}

Membership JobCoordinator::join_elastic(int round, const RoundHistory& mine) {
  const Membership m = rendezvous_->join(round, mine);
  node_rank_ = m.node_rank;
  nnodes_ = m.nnodes;
  // Node ranks are dealt anew each round: a beat counter seen before may now be another agent's.
  peers_.clear();
  return m;
}

void JobCoordinator::claim_node_rank() {
  // Node 0's agent reaches the store through --master-addr too, so a second node 0 on another host
  // claims in the same store as the first.
  const std::string me = "pid " + std::to_string(::getpid()) + " on host " + host_name();
  const std::string key = "node/" + std::to_string(node_rank_);
  const std::string holder = as_string(store_->compareSet(key, {}, as_bytes(me)));
  if (holder != me)
    throw std::runtime_error("--node-rank " + std::to_string(node_rank_) + " is taken: the agent " + holder +
                             " joined the job as node " + std::to_string(node_rank_) + " before this one (" +
                             me + "); give each node's agent its own --node-rank, 0 to " +
                             std::to_string(nnodes_ - 1));
}

std::string JobCoordinator::key(int round, const std::string& what) const {
  return "round/" + std::to_string(round) + "/" + what;
}

void JobCoordinator::join_round(int round) {
  store_->add(key(round, "joined"), 1);
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options_.rdzv_timeout_s * 1000));
  int64_t joined = 0;
  while ((joined = store_->add(key(round, "joined"), 0)) < nnodes_) {
    if (Clock::now() > deadline) {
      std::string missing;
      for (int n = 0; n < nnodes_; ++n)
        if (!store_->check({"nproc/" + std::to_string(n)})) missing += (missing.empty() ? "" : ",") + std::to_string(n);
      throw std::runtime_error("rendezvous timed out after " + std::to_string(static_cast<int>(options_.rdzv_timeout_s)) +
                               "s: " + std::to_string(joined) + " of " + std::to_string(nnodes_) +
                               " nodes joined" + (missing.empty() ? "" : " (never seen: node " + missing + ")"));
    }
    heartbeat();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (round == 0) {
    for (int n = 0; n < nnodes_; ++n) {
      const int theirs = std::stoi(as_string(store_->get("nproc/" + std::to_string(n))));
      if (theirs != options_.nproc_per_node)
        throw std::runtime_error("node " + std::to_string(n) + " runs --nproc-per-node " + std::to_string(theirs) +
                                 " but node " + std::to_string(node_rank_) + " runs " +
                                 std::to_string(options_.nproc_per_node) + ": every node must run the same number");
    }
  }
  // Heartbeats restart from now: a node is not late for the time spent waiting here.
  for (auto& [node, seen] : peers_) seen.second = Clock::now();
}

void JobCoordinator::heartbeat() {
  if (nnodes_ == 1) return;
  const auto now = Clock::now();
  if (now - last_beat_ < kBeatInterval) return;
  last_beat_ = now;
  store_->add("beat/" + std::to_string(node_rank_), 1);
}

void JobCoordinator::report_failure(int round, const std::string& what, bool restartable) {
  // Set before the failure itself, so a node that sees the failure sees whether it is final.
  if (!restartable) store_->set(key(round, "final"), as_bytes("1"));
  // compareSet keeps the first report when two nodes fail at once.
  store_->compareSet(key(round, "failed"), {}, as_bytes("node " + std::to_string(node_rank_) + ": " + what));
}

std::optional<std::string> JobCoordinator::failure(int round) {
  const auto now = Clock::now();
  if (now - last_check_ < std::chrono::milliseconds(200)) return std::nullopt;
  last_check_ = now;
  if (store_->check({key(round, "failed")})) return as_string(store_->get(key(round, "failed")));
  if (nnodes_ == 1) return std::nullopt;
  for (int n = 0; n < nnodes_; ++n) {
    if (n == node_rank_) continue;
    const int64_t beat = store_->add("beat/" + std::to_string(n), 0);
    auto it = peers_.find(n);
    if (it == peers_.end() || it->second.first != beat) {
      peers_[n] = {beat, now};
    } else if (now - it->second.second > std::chrono::milliseconds(static_cast<int64_t>(options_.heartbeat_timeout_s * 1000))) {
      const std::string what = "node " + std::to_string(n) + "'s agent stopped beating for " +
                               std::to_string(static_cast<int>(options_.heartbeat_timeout_s)) + "s (agent dead or host down)";
      report_failure(round, what);
      return as_string(store_->get(key(round, "failed")));
    }
  }
  return std::nullopt;
}

bool JobCoordinator::failure_is_final(int round) { return store_->check({key(round, "final")}); }

void JobCoordinator::report_done(int round) { store_->add(key(round, "done"), 1); }

bool JobCoordinator::all_done(int round) { return store_->add(key(round, "done"), 0) >= nnodes_; }

void JobCoordinator::leave(int round) {
  store_->add(key(round, "left"), 1);
  if (!hosts_store_) return;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (store_->add(key(round, "left"), 0) < nnodes_ && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

std::optional<std::string> JobCoordinator::published_run_dir(int round) {
  // A round whose rank 0 failed before publishing may follow one that did.
  for (int r = round; r >= 0; --r) {
    auto workers = c10::make_intrusive<c10d::PrefixStore>(job_store_prefix(r), job_store_);
    if (workers->check({kRunDirKey})) return as_string(workers->get(kRunDirKey));
  }
  return std::nullopt;
}

}  // namespace dtrain
