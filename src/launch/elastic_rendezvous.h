// How the agents of an elastic job (--nnodes MIN:MAX) agree on each round's members, through the
// store. Round r's keys, under "rdzv/<r>/":
//   count        agents that joined, each taking the next number (its join order)
//   member/<i>   what the i-th brought: its node rank, world and failure time in the round before
//   closed       the node count n the round closed with; the first n to join are its members
//   ended        members that saw the round end: the next round may close only once one did
// A round closes when MAX agents joined, or when at least MIN did and --rdzv-last-call passed with no
// new one, at the largest count n whose world (n x nproc_per_node) is a multiple of --world-multiple.
// Members keep their order: those of the round before first, by their old node rank, then newcomers
// by join order. An agent that came too late is a waiter: it joins the next round, and its presence
// ends the running round once the next one would be larger (what torchrun does with waiting nodes).
#pragma once
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <functional>
#include <string>

#include "launch/launch_options.h"

namespace dtrain {

// What an agent brings to a round from the one it ran before (none: node_rank -1).
struct RoundHistory {
  int node_rank = -1;
  int world = 0;
  double failure_time = 0;  // Unix seconds when this agent saw that round end; 0 when it did not
};

struct Membership {
  int round = 0;
  int node_rank = 0;
  int nnodes = 0;            // 0: the job succeeded before this agent got a place in it
  int previous_world = 0;    // the world of the round before, as its members tell; 0 when none ran one
  double failure_time = 0;   // the earliest a member saw that round end; 0 when none did
};

class ElasticRendezvous {
 public:
  ElasticRendezvous(const LaunchOptions& options, c10::intrusive_ptr<c10d::Store> store)
      : options_(options), store_(std::move(store)) {}

  // Joins round `round` or, when later ones closed in this store already, the one after them; blocks
  // until a round that includes this agent closes. Throws std::runtime_error naming why on
  // --rdzv-timeout; c10::Error when the store is lost.
  Membership join(int round, const RoundHistory& mine);
  // Whether agents wait for the round after `m`'s in numbers that make that one larger.
  bool larger_round_waiting(const Membership& m);
  // This agent saw `round` end (it says so once, before it stops its workers): the next one may close.
  void end_round(int round);
  // The job succeeded: agents that come later are told so rather than start it again.
  void mark_succeeded();

 private:
  // The node count a round with `joined` agents closes with; 0 when none fits MIN:MAX and the multiple.
  int closing_count(int64_t joined) const;
  std::string key(int round, const std::string& what) const;
  // Blocks until `round` closes (closing it when this agent may); returns its node count.
  int wait_for_close(int round);
  Membership place(int round, int n, int64_t my_index);

  LaunchOptions options_;
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace dtrain
