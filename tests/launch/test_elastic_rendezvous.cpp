// The elastic rendezvous's rules on an in-process store, one thread per agent: when a round closes,
// who is in it, in which order, and what an agent is told when none can close.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <algorithm>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "launch/elastic_rendezvous.h"

namespace dtrain::test {
namespace {

LaunchOptions elastic(int min_nodes, int max_nodes, int nproc = 1, int multiple = 1) {
  LaunchOptions o;
  o.elastic = true;
  o.min_nodes = min_nodes;
  o.nnodes = max_nodes;
  o.nproc_per_node = nproc;
  o.world_multiple = multiple;
  o.rdzv_last_call_s = 0.2;
  o.rdzv_timeout_s = 5;
  return o;
}

// Each agent joins `round` with its history, all at once; their memberships in that order.
std::vector<Membership> join_together(const LaunchOptions& o, c10::intrusive_ptr<c10d::Store> store, int round,
                                      const std::vector<RoundHistory>& agents) {
  std::vector<std::future<Membership>> joins;
  for (const auto& h : agents)
    joins.push_back(std::async(std::launch::async, [=] { return ElasticRendezvous(o, store).join(round, h); }));
  std::vector<Membership> out;
  for (auto& j : joins) out.push_back(j.get());
  return out;
}

TEST(ElasticRendezvous, MaxNodesCloseTheRoundAndEachGetsItsOwnRank) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  const auto m = join_together(elastic(1, 3), store, 0, {{}, {}, {}});
  ASSERT_EQ(m.size(), 3u);
  std::vector<int> ranks;
  for (const auto& x : m) {
    EXPECT_EQ(x.nnodes, 3);
    EXPECT_EQ(x.round, 0);
    EXPECT_EQ(x.previous_world, 0);
    EXPECT_EQ(x.failure_time, 0);
    ranks.push_back(x.node_rank);
  }
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<int>{0, 1, 2}));
}

// The round before's members keep their order ahead of a newcomer; its world and the earliest failure
// time reach every member.
TEST(ElasticRendezvous, SurvivorsKeepTheirOrderAheadOfNewcomers) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  const auto m = join_together(elastic(1, 3), store, 4, {{}, {2, 6, 100.5}, {1, 6, 100.25}});
  EXPECT_EQ(m[2].node_rank, 0);  // node 1 before
  EXPECT_EQ(m[1].node_rank, 1);  // node 2 before
  EXPECT_EQ(m[0].node_rank, 2);  // new
  for (const auto& x : m) {
    EXPECT_EQ(x.round, 4);
    EXPECT_EQ(x.previous_world, 6);
    EXPECT_DOUBLE_EQ(x.failure_time, 100.25);
  }
}

TEST(ElasticRendezvous, FewerThanMaxCloseAfterTheLastCall) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  const auto m = join_together(elastic(1, 4), store, 0, {{}, {}});
  EXPECT_EQ(m[0].nnodes, 2);
  EXPECT_EQ(m[1].nnodes, 2);
}

// Three nodes of one rank cannot form a world that is a multiple of 2: the round takes two, and the
// third waits for the next round, which cannot close while this one runs.
TEST(ElasticRendezvous, ARoundTakesOnlyACountThatFormsTheMesh) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto o = elastic(1, 3, 1, 2);
  o.rdzv_timeout_s = 1.5;
  std::vector<std::future<Membership>> joins;
  for (int i = 0; i < 3; ++i) joins.push_back(std::async(std::launch::async, [=] { return ElasticRendezvous(o, store).join(0, {}); }));
  int placed = 0;
  std::string waiter_error;
  for (auto& j : joins) {
    try {
      const Membership m = j.get();
      EXPECT_EQ(m.nnodes, 2);
      ++placed;
    } catch (const std::runtime_error& e) {
      waiter_error = e.what();
    }
  }
  EXPECT_EQ(placed, 2);
  EXPECT_NE(waiter_error.find("in round 1: round 0 still runs"), std::string::npos) << waiter_error;
  // The waiter is what the running round's members see, and it would not make a larger round (3 x 1
  // is not a multiple of 2), so the round is not ended for it.
  ElasticRendezvous running(o, store);
  EXPECT_FALSE(running.larger_round_waiting({0, 0, 2, 0, 0}));
}

TEST(ElasticRendezvous, AWaitingNodeEndsASmallerRound) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  const auto o = elastic(1, 2);
  ElasticRendezvous first(o, store);
  const Membership alone = first.join(0, {});
  ASSERT_EQ(alone.nnodes, 1);
  EXPECT_FALSE(first.larger_round_waiting(alone));
  auto newcomer = std::async(std::launch::async, [=] { return ElasticRendezvous(o, store).join(0, {}); });
  ASSERT_TRUE([&] {
    for (int i = 0; i < 200; ++i) {
      if (first.larger_round_waiting(alone)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }());
  first.end_round(0);
  const Membership both = first.join(1, {alone.node_rank, 1, 0});
  const Membership theirs = newcomer.get();
  EXPECT_EQ(both.round, 1);
  EXPECT_EQ(both.nnodes, 2);
  EXPECT_EQ(both.node_rank, 0);
  EXPECT_EQ(theirs.node_rank, 1);
  EXPECT_EQ(theirs.previous_world, 1);
}

TEST(ElasticRendezvous, TooFewNodesTimeOutNamingTheMinimum) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto o = elastic(2, 3);
  o.rdzv_timeout_s = 0.5;
  std::string error = "no error";
  try {
    ElasticRendezvous(o, store).join(0, {});
  } catch (const std::runtime_error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("1 node(s) joined, fewer than the 2 --nnodes asks for at least"), std::string::npos) << error;
}

TEST(ElasticRendezvous, AJobThatSucceededTurnsLateAgentsAway) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  const auto o = elastic(1, 2);
  ElasticRendezvous first(o, store);
  const Membership m = first.join(0, {});
  first.mark_succeeded();
  EXPECT_EQ(ElasticRendezvous(o, store).join(0, {}).nnodes, 0);
  EXPECT_EQ(m.nnodes, 1);
}

}  // namespace
}  // namespace dtrain::test
