// How the agents of one job agree, through the store node 0 hosts: they meet at the start of every
// round (the first run and each restart), any agent can declare the round failed, each one beats a
// heartbeat so a dead agent is noticed, and they leave together when every node has succeeded.
// The round number is the job's restart count, identical on every node. An elastic job's rounds
// are formed by launch/elastic_rendezvous.h and each one sets the node's rank and the node count.
#pragma once
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "launch/elastic_rendezvous.h"
#include "launch/launch_options.h"

namespace dtrain {

class JobCoordinator {
 public:
  // Node 0 hosts the store (on a free port when none was given); other nodes connect to it,
  // retrying until --rdzv-timeout. Elastic: the agent that binds the port first hosts it.
  explicit JobCoordinator(const LaunchOptions& options);

  int port() const { return port_; }
  bool hosts_store() const { return hosts_store_; }

  // Elastic: joins the next round at or after `round` (launch/elastic_rendezvous.h) and takes the node
  // rank and node count it assigns.
  Membership join_elastic(int round, const RoundHistory& mine);
  // Elastic: whether enough agents wait to join that the next round would be larger than `m`'s.
  bool larger_round_waiting(const Membership& m) { return rendezvous_->larger_round_waiting(m); }
  void end_round(int round) { rendezvous_->end_round(round); }
  void mark_succeeded() { rendezvous_->mark_succeeded(); }
  // Elastic: after the store was lost, connects to its new host or becomes it.
  void reopen_store();

  // Blocks until every node has joined `round`; throws naming the missing nodes on timeout.
  void join_round(int round);
  // Beats this node's heartbeat (rate-limited; call as often as you like).
  void heartbeat();
  // Declares `round` failed for every node; the first declaration wins. `restartable` false: a rank
  // refused its input, so no node restarts.
  void report_failure(int round, const std::string& what, bool restartable = true);
  // Whether a node declared `round`'s failure one that no restart can mend.
  bool failure_is_final(int round);
  // Set once any node declared `round` failed, or a node's heartbeat stopped.
  std::optional<std::string> failure(int round);
  // This node's workers all succeeded in `round`.
  void report_done(int round);
  bool all_done(int round);
  // Last act before exiting after success: node 0 keeps the store up until the others have left.
  void leave(int round);
  // The run directory a trainer's rank 0 published in `round` or an earlier one, if any did. Does
  // not wait for it.
  std::optional<std::string> published_run_dir(int round);

 private:
  // Claims this node's rank in the store with the agent's pid and host; throws naming both agents
  // when another one holds it.
  void claim_node_rank();
  std::string key(int round, const std::string& what) const;
  void use_store(c10::intrusive_ptr<c10d::Store> store);

  LaunchOptions options_;
  int node_rank_ = 0;
  int nnodes_ = 1;
  bool hosts_store_ = false;
  std::unique_ptr<ElasticRendezvous> rendezvous_;
  c10::intrusive_ptr<c10d::Store> job_store_;  // the whole store, the workers' keys included
  c10::intrusive_ptr<c10d::Store> store_;      // the agents' part of it
  int port_ = 0;
  std::chrono::steady_clock::time_point last_beat_{};
  std::chrono::steady_clock::time_point last_check_{};
  std::map<int, std::pair<int64_t, std::chrono::steady_clock::time_point>> peers_;  // node -> (beat, when it changed)
};

}  // namespace dtrain
