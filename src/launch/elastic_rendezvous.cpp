#include "launch/elastic_rendezvous.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/host_name.h"
#include "common/store_bytes.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

struct Member {
  int64_t index = 0;  // join order, from 1
  RoundHistory before;
  int nproc = 0;
  std::string who;  // "pid P on host H"
};

std::string encode(const RoundHistory& h, int nproc) {
  std::ostringstream s;
  s.precision(17);
  s << h.node_rank << ' ' << h.world << ' ' << h.failure_time << ' ' << nproc << " pid " << ::getpid() << " on host "
    << host_name();
  return s.str();
}

Member decode(int64_t index, const std::string& text) {
  Member m;
  m.index = index;
  std::istringstream s(text);
  s >> m.before.node_rank >> m.before.world >> m.before.failure_time >> m.nproc;
  std::getline(s >> std::ws, m.who);
  return m;
}

std::string seconds(double s) { return std::to_string(static_cast<int>(s)) + "s"; }

}  // namespace

std::string ElasticRendezvous::key(int round, const std::string& what) const {
  return "rdzv/" + std::to_string(round) + "/" + what;
}

int ElasticRendezvous::closing_count(int64_t joined) const {
  for (int64_t n = std::min<int64_t>(joined, options_.nnodes); n >= options_.min_nodes; --n)
    if ((n * options_.nproc_per_node) % options_.world_multiple == 0) return static_cast<int>(n);
  return 0;
}

int ElasticRendezvous::wait_for_close(int round) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options_.rdzv_timeout_s * 1000));
  const auto last_call = std::chrono::milliseconds(static_cast<int64_t>(options_.rdzv_last_call_s * 1000));
  const auto grace = std::chrono::milliseconds(static_cast<int64_t>(options_.grace_s * 1000));
  int64_t seen = -1, seen_ended = -1;
  auto changed = Clock::now();
  for (;;) {
    if (store_->check({key(round, "closed")})) return std::stoi(as_string(store_->get(key(round, "closed"))));
    if (store_->check({"rdzv/succeeded"})) return 0;
    const int64_t joined = store_->add(key(round, "count"), 0);
    // The round before must have ended first: its members are still training while waiters gather.
    // Its members announce its end before they stop their workers, and each announcement, like each
    // newcomer, restarts the last call, so the slowest survivor to stop its workers is not left out.
    const bool previous_closed_here = round > 0 && store_->check({"rdzv/last_closed"}) &&
                                      std::stoi(as_string(store_->get("rdzv/last_closed"))) >= round - 1;
    const int64_t ended = previous_closed_here ? store_->add(key(round - 1, "ended"), 0) : 0;
    const bool previous_over = !previous_closed_here || ended > 0;
    if (joined != seen || ended != seen_ended) {
      seen = joined;
      seen_ended = ended;
      changed = Clock::now();
    }
    const auto quiet = Clock::now() - changed;
    const int n = closing_count(joined);
    // Fewer than MAX close after the last call, and later still (by --grace-period) while members of
    // the round before that saw it end have not joined yet.
    if (previous_over && n > 0 && (n == options_.nnodes || (quiet >= last_call && (joined >= ended || quiet >= last_call + grace)))) {
      // The first agent to close it decides; the others read its count.
      store_->compareSet(key(round, "closed"), {}, as_bytes(std::to_string(n)));
      continue;
    }
    if (Clock::now() > deadline) {
      const std::string waited = "rendezvous timed out after " + seconds(options_.rdzv_timeout_s) + " (--rdzv-timeout) in round " +
                                 std::to_string(round) + ": ";
      if (!previous_over)
        throw std::runtime_error(waited + "round " + std::to_string(round - 1) + " still runs (a round with all the nodes it can take "
                                 "is not ended for newcomers; --nnodes " + std::to_string(options_.min_nodes) + ":" +
                                 std::to_string(options_.nnodes) + ")");
      if (joined < options_.min_nodes)
        throw std::runtime_error(waited + std::to_string(joined) + " node(s) joined, fewer than the " +
                                 std::to_string(options_.min_nodes) + " --nnodes asks for at least");
      throw std::runtime_error(waited + "the new membership cannot form the mesh: no count of " + std::to_string(joined) +
                               " node(s) or fewer, at least " + std::to_string(options_.min_nodes) + ", makes a world of " +
                               std::to_string(options_.nproc_per_node) + " rank(s) per node that is a multiple of " +
                               std::to_string(options_.world_multiple) + " (--world-multiple; under dtrain run, the config's parallel.tp x pp x cp)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Membership ElasticRendezvous::join(int round, const RoundHistory& mine) {
  if (store_->check({"rdzv/last_closed"}))
    round = std::max(round, std::stoi(as_string(store_->get("rdzv/last_closed"))) + 1);
  for (;; ++round) {
    const int64_t index = store_->add(key(round, "count"), 1);
    store_->set(key(round, "member/" + std::to_string(index)), as_bytes(encode(mine, options_.nproc_per_node)));
    const int n = wait_for_close(round);
    if (n == 0) return Membership{round, 0, 0, 0, 0};  // the job succeeded
    // Joined after the round closed: a waiter, first in line for the next one.
    if (index > n) continue;
    store_->set("rdzv/last_closed", as_bytes(std::to_string(round)));
    return place(round, n, index);
  }
}

Membership ElasticRendezvous::place(int round, int n, int64_t my_index) {
  std::vector<Member> members;
  for (int64_t i = 1; i <= n; ++i) {
    // Each member writes its key right after taking its number; get() waits for it.
    members.push_back(decode(i, as_string(store_->get(key(round, "member/" + std::to_string(i))))));
  }
  // The round before's members keep their order, so its node 0 stays node 0 while it lives.
  std::stable_sort(members.begin(), members.end(), [](const Member& a, const Member& b) {
    const int ra = a.before.node_rank < 0 ? INT_MAX : a.before.node_rank, rb = b.before.node_rank < 0 ? INT_MAX : b.before.node_rank;
    return ra != rb ? ra < rb : a.index < b.index;
  });
  Membership m{round, 0, n, 0, 0};
  for (int rank = 0; rank < n; ++rank) {
    const Member& member = members[size_t(rank)];
    if (member.index == my_index) m.node_rank = rank;
    if (member.nproc != options_.nproc_per_node)
      throw std::runtime_error("the agent " + member.who + " runs --nproc-per-node " + std::to_string(member.nproc) + " but this one runs " +
                               std::to_string(options_.nproc_per_node) + ": every node must run the same number");
    if (member.before.world > 0 && m.previous_world == 0) m.previous_world = member.before.world;
    if (member.before.failure_time > 0 && (m.failure_time == 0 || member.before.failure_time < m.failure_time))
      m.failure_time = member.before.failure_time;
  }
  return m;
}

bool ElasticRendezvous::larger_round_waiting(const Membership& m) {
  if (m.nnodes >= options_.nnodes) return false;
  const int64_t waiting = store_->add(key(m.round + 1, "count"), 0);
  return waiting > 0 && closing_count(m.nnodes + waiting) > m.nnodes;
}

void ElasticRendezvous::end_round(int round) { store_->add(key(round, "ended"), 1); }

void ElasticRendezvous::mark_succeeded() { store_->set("rdzv/succeeded", as_bytes("1")); }

}  // namespace dtrain
