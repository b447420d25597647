// The elastic job's course (--nnodes MIN:MAX): rendezvous, run the round, and after it ends, whatever
// ended it, rendezvous again. A round that ended with a failure and was followed by one of another
// size was a membership change (a node lost, or one waiting to join) and is not counted against
// --max-restarts; a failure the next round has as many nodes for is a worker failure, and is.
#include <c10/util/Exception.h>
#include <unistd.h>

#include <chrono>

#include "common/host_name.h"
#include "launch/agent.h"

namespace dtrain {
namespace {

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

std::string nodes(int n) { return std::to_string(n) + " node" + (n == 1 ? "" : "s"); }

}  // namespace

int Agent::run_elastic(JobCoordinator& coord) {
  const int per_node = options_.nproc_per_node;
  report_.name_after_agent(host_name(), ::getpid());
  tell("elastic agent (pid " + std::to_string(::getpid()) + "), --nnodes " + std::to_string(options_.min_nodes) + ":" +
       std::to_string(options_.nnodes) + ", " + std::to_string(per_node) + " workers per node, rendezvous store at " +
       options_.master_addr + ":" + std::to_string(coord.port()) + (coord.hosts_store() ? " (hosted by this agent)" : ""));
  RoundHistory mine;
  RoundFailure failure;
  int wanted = 0, last_nnodes = 0, worker_failures = 0;
  bool failed_before = false;  // the round before ended with a failure this agent may have to count
  // After the store was lost: connect to its new host or become it. False when neither worked.
  auto reopen = [&](const std::string& what) {
    tell("lost the rendezvous store (" + what + "); connecting to its new host or taking it over");
    try {
      coord.reopen_store();
    } catch (const std::exception& e) {
      tell(std::string("error: ") + e.what());
      return false;
    }
    if (coord.hosts_store()) tell("this agent now hosts the rendezvous store at " + options_.master_addr + ":" + std::to_string(coord.port()));
    return true;
  };
  for (;;) {
    Membership m;
    try {
      m = coord.join_elastic(wanted, mine);
    } catch (const c10::Error& e) {
      if (!reopen(e.what_without_backtrace())) return finish("error", 1, wanted, "error: the rendezvous store is gone", nullptr);
      continue;
    } catch (const std::exception& e) {
      return finish("error", 1, wanted, std::string("error: ") + e.what(), failed_before ? &failure : nullptr);
    }
    if (m.nnodes == 0) return finish("succeeded", 0, m.round, "the job had succeeded before this agent got a place in it", nullptr);
    report_.set_node_rank(m.node_rank);
    if (last_nnodes > 0 && m.nnodes != last_nnodes) {
      tell("membership changed: " + nodes(last_nnodes) + " -> " + nodes(m.nnodes) + " (world " + std::to_string(last_nnodes * per_node) +
           " -> " + std::to_string(m.nnodes * per_node) + "); not counted against --max-restarts");
      report_.record_membership(m.round, last_nnodes, m.nnodes, per_node);
    } else if (failed_before) {
      if (++worker_failures > options_.max_restarts) {
        const int done = worker_failures - 1;
        const std::string verdict = "giving up after " + std::to_string(done) + (done == 1 ? " restart" : " restarts") + " (--max-restarts " +
                                    std::to_string(options_.max_restarts) + "): " + failure.what;
        try {
          coord.report_failure(m.round, verdict, false);  // the round's other members stop with it
        } catch (const std::exception&) {
        }
        return finish("failed", 1, m.round, verdict, &failure);
      }
      tell("restarting the job (restart " + std::to_string(worker_failures) + " of " + std::to_string(options_.max_restarts) + ")");
    }
    node_rank_ = m.node_rank;
    nnodes_ = m.nnodes;
    previous_world_ = m.previous_world;
    failure_time_ = m.failure_time;
    tell("round " + std::to_string(m.round) + ": node " + std::to_string(m.node_rank) + " of " + nodes(m.nnodes) + ", world " +
         std::to_string(m.nnodes * per_node));
    failure = RoundFailure{};
    Outcome outcome;
    bool store_lost = false;
    try {
      outcome = run_round(coord, m.round, &failure, &m);
    } catch (const c10::Error& e) {
      store_lost = true;
      failure.what = e.what_without_backtrace();
      outcome = Outcome::Regroup;
    }
    const double ended_at = unix_now();
    // Said before the workers are stopped, which can take --grace-period: the next round waits for it.
    if (!store_lost && outcome != Outcome::Success && outcome != Outcome::Stopped) {
      try {
        coord.end_round(m.round);
      } catch (const c10::Error& e) {
        store_lost = true;
        failure.what = e.what_without_backtrace();
      }
    }
    stop_workers();
    if (coord.hosts_store()) learn_run_dir(coord, m.round);
    if (outcome == Outcome::Stopped) return finish_stopped(coord, m.round);
    if (outcome == Outcome::Failure && !failure.restartable)
      return finish("failed", 1, m.round, "not restarting: " + failure.what + ", and a restart would be refused the same way", &failure);
    mine = {m.node_rank, m.nnodes * per_node, ended_at};
    wanted = m.round + 1;
    last_nnodes = m.nnodes;
    failed_before = outcome == Outcome::Failure;
    if (outcome == Outcome::Success) {
      try {
        coord.mark_succeeded();
        coord.leave(m.round);
      } catch (const c10::Error&) {
        // Every worker succeeded; a store lost now only cuts the goodbyes short.
      }
      return finish("succeeded", 0, m.round, m.round == 0 ? "the job succeeded" : "the job succeeded in round " + std::to_string(m.round), nullptr);
    }
    if (store_lost && !reopen(failure.what.substr(0, failure.what.find('\n'))))
      return finish("error", 1, m.round, "error: the rendezvous store is gone", nullptr);
  }
}

}  // namespace dtrain
