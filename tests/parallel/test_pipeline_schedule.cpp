// Pipeline schedules as data, without communication: every schedule passes the checker over pp 1-8,
// virtual stages 1-4 and micro-batches 1-16 where it takes them; the simulator's bubble equals the
// closed forms; the peak micro-batches in flight are each schedule's; and broken schedules fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>

#include "parallel/pipeline/pipeline_schedule.h"
#include "parallel/pipeline/pipeline_simulator.h"
#include "parallel/pipeline/schedule_check.h"

namespace dtrain {
namespace {

using Kind = PipelineAction::Kind;

// Whether make_schedule takes these sizes (interleaved with virtual stages needs m a multiple of pp).
bool accepted(ScheduleKind kind, int pp, int v, int m) {
  if (kind != ScheduleKind::Interleaved1F1B) return v == 1;
  return v == 1 || m % pp == 0;
}

std::string error_of(ScheduleKind kind, int pp, int v, int m) {
  try {
    make_schedule(kind, pp, v, m);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

constexpr double kExact = 1e-9;  // the simulated times are sums of small whole numbers

TEST(PipelineSchedule, EverySchedulePassesTheCheckerOverPp1To8VirtualStages1To4MicroBatches1To16) {
  int checked = 0;
  for (const auto& [kind, name] : kScheduleNames)
    for (int pp = 1; pp <= 8; ++pp)
      for (int v = 1; v <= 4; ++v)
        for (int m = 1; m <= 16; ++m) {
          if (!accepted(kind, pp, v, m)) continue;
          const PipelineSchedule s = make_schedule(kind, pp, v, m);
          ASSERT_EQ(check_schedule(s), "") << name << " pp " << pp << " v " << v << " m " << m;
          ++checked;
        }
  EXPECT_EQ(checked, 3 * 8 * 16 + 8 * 16 + 3 * (16 + 8 + 5 + 4 + 3 + 2 + 2 + 2));
}

TEST(PipelineSchedule, SizesItCannotRunAreRefusedByName) {
  EXPECT_EQ(error_of(ScheduleKind::Interleaved1F1B, 4, 2, 6),
            "interleaved_1f1b with 2 virtual stages needs micro-batches that are a multiple of pp (4), got 6");
  EXPECT_EQ(error_of(ScheduleKind::OneFOneB, 4, 2, 8),
            "the 1f1b schedule runs one chunk per rank, so virtual stages must be 1, got 2 (interleaved_1f1b takes more)");
  EXPECT_EQ(error_of(ScheduleKind::GPipe, 0, 1, 8), "pp must be at least 1, got 0");
  EXPECT_EQ(error_of(ScheduleKind::GPipe, 2, 1, 0), "micro-batches must be at least 1, got 0");
}

TEST(PipelineSchedule, OneRankSendsNothingEvenWithSeveralChunks) {
  for (int v = 1; v <= 4; ++v) {
    const PipelineSchedule s = make_schedule(ScheduleKind::Interleaved1F1B, 1, v, 5);
    ASSERT_EQ(s.actions.size(), 1u);
    EXPECT_EQ(s.actions[0].size(), size_t(2 * 5 * v));
    EXPECT_TRUE(std::all_of(s.actions[0].begin(), s.actions[0].end(), [](const PipelineAction& a) { return a.is_compute(); }));
  }
}

// Rank 1 takes micro-batch 1's activation before it sends micro-batch 0's gradient: the two messages
// cross, and with both sends first each rank would wait on the other under blocking sends.
TEST(PipelineSchedule, OneFOneBOnTwoRanksReadsAsWarmUpSteadyStateAndCoolDown) {
  const PipelineSchedule s = make_schedule(ScheduleKind::OneFOneB, 2, 1, 3);
  std::string rank0, rank1;
  for (const auto& a : s.actions[0]) rank0 += describe(a) + " ";
  for (const auto& a : s.actions[1]) rank1 += describe(a) + " ";
  EXPECT_EQ(rank0,
            "F(mb 0, chunk 0) send_act(mb 0, chunk 0 -> rank 1) F(mb 1, chunk 0) send_act(mb 1, chunk 0 -> rank 1) "
            "recv_grad(mb 0, chunk 0 <- rank 1) B(mb 0, chunk 0) F(mb 2, chunk 0) send_act(mb 2, chunk 0 -> rank 1) "
            "recv_grad(mb 1, chunk 0 <- rank 1) B(mb 1, chunk 0) recv_grad(mb 2, chunk 0 <- rank 1) B(mb 2, chunk 0) ");
  EXPECT_EQ(rank1,
            "recv_act(mb 0, chunk 1 <- rank 0) F(mb 0, chunk 1) B(mb 0, chunk 1) recv_act(mb 1, chunk 1 <- rank 0) "
            "send_grad(mb 0, chunk 1 -> rank 0) F(mb 1, chunk 1) B(mb 1, chunk 1) recv_act(mb 2, chunk 1 <- rank 0) "
            "send_grad(mb 1, chunk 1 -> rank 0) F(mb 2, chunk 1) B(mb 2, chunk 1) send_grad(mb 2, chunk 1 -> rank 0) ");
}

// The sends and receives sit where no cost ratio makes a rank wait at one longer than the data takes:
// the closed forms hold for B = F and B = 2F, and for B = 3F and B = F/2 as well.
constexpr double kBackwardCosts[] = {1.0, 2.0, 3.0, 0.5};

TEST(PipelineSimulator, GPipeAndOneFOneBBubbleIsTheClosedFormWhateverBCosts) {
  for (const ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB})
    for (const double backward : kBackwardCosts)
      for (int pp = 1; pp <= 8; ++pp)
        for (int m = 1; m <= 16; ++m) {
          PipelineCosts costs;
          costs.backward = backward;
          costs.weight = 0;
          const double simulated = simulate_pipeline(make_schedule(kind, pp, 1, m), costs).bubble_fraction;
          EXPECT_NEAR(simulated, double(pp - 1) / (m + pp - 1), kExact) << schedule_name(kind) << " pp " << pp << " m " << m;
          EXPECT_NEAR(simulated, closed_form_bubble(kind, pp, 1, m, costs), kExact);
        }
}

TEST(PipelineSimulator, InterleavedBubbleIsTheClosedFormWhateverBCosts) {
  for (const double backward : kBackwardCosts)
    for (int pp = 1; pp <= 8; ++pp)
      for (int v = 1; v <= 4; ++v)
        for (int m = pp; m <= 16; m += pp) {
          PipelineCosts costs;
          costs.backward = backward;
          costs.weight = 0;
          const double simulated = simulate_pipeline(make_schedule(ScheduleKind::Interleaved1F1B, pp, v, m), costs).bubble_fraction;
          EXPECT_NEAR(simulated, double(pp - 1) / (v * m + pp - 1), kExact) << "pp " << pp << " v " << v << " m " << m;
        }
}

// Qi et al.: with F = I = W, ZB-H1 idles (p-1)(F+I-W) per rank against 1F1B's (p-1)(F+I+W), a third.
// The fractions differ by more, since ZB-H1's step is also shorter: (p-1)/(3m+p-1) against (p-1)/(m+p-1).
TEST(PipelineSimulator, ZeroBubbleIdlesAtMostAThirdOfOneFOneBFromTwicePpMicroBatches) {
  const PipelineCosts costs;  // F 1, B 2 = I 1 + W 1
  for (int pp = 2; pp <= 8; ++pp)
    for (int m = 2 * pp; m <= 16; ++m) {
      const PipelineTimeline zb = simulate_pipeline(make_schedule(ScheduleKind::ZeroBubble, pp, 1, m), costs);
      const PipelineTimeline one = simulate_pipeline(make_schedule(ScheduleKind::OneFOneB, pp, 1, m), costs);
      EXPECT_LE(zb.idle_time(), one.idle_time() / 3 + kExact) << "pp " << pp << " m " << m;
      EXPECT_LT(zb.bubble_fraction, one.bubble_fraction);
    }
}

TEST(PipelineSimulator, ZeroBubbleBubbleIsTheClosedFormFromPpMicroBatches) {
  const PipelineCosts costs;
  for (int pp = 1; pp <= 8; ++pp)
    for (int m = pp; m <= 16; ++m) {
      const double simulated = simulate_pipeline(make_schedule(ScheduleKind::ZeroBubble, pp, 1, m), costs).bubble_fraction;
      EXPECT_NEAR(simulated, double(pp - 1) / (3 * m + pp - 1), kExact) << "pp " << pp << " m " << m;
      EXPECT_NEAR(simulated, closed_form_bubble(ScheduleKind::ZeroBubble, pp, 1, m, costs), kExact);
    }
}

TEST(PipelineSchedule, PeakInFlightIsMForGPipePpMinusRankFor1F1BAndPpForZeroBubble) {
  for (int pp = 1; pp <= 8; ++pp)
    for (int m = 1; m <= 16; ++m) {
      const auto gpipe = peak_in_flight(make_schedule(ScheduleKind::GPipe, pp, 1, m));
      const auto one = peak_in_flight(make_schedule(ScheduleKind::OneFOneB, pp, 1, m));
      const auto zb = peak_in_flight(make_schedule(ScheduleKind::ZeroBubble, pp, 1, m));
      for (int r = 0; r < pp; ++r) {
        EXPECT_EQ(gpipe[r], m);
        EXPECT_EQ(one[r], std::min(m, pp - r)) << "pp " << pp << " m " << m << " rank " << r;
        EXPECT_EQ(zb[r], std::min(m, pp)) << "pp " << pp << " m " << m << " rank " << r;
      }
    }
}

// The receives a rank has posted and not yet read when each of its computes starts, posting as the
// runner does (receives_posted_through); fails the test if a receive would be posted after its place
// in the list or after the compute that reads it.
int most_receives_waiting(const std::vector<PipelineAction>& actions) {
  std::vector<const PipelineAction*> waiting;
  size_t posted = 0;
  int most = 0;
  for (size_t i = 0; i < actions.size(); ++i) {
    const PipelineAction& a = actions[i];
    for (const size_t through = receives_posted_through(actions, i); posted < through; ++posted)
      if (actions[posted].kind == Kind::RecvActivation || actions[posted].kind == Kind::RecvGradient) waiting.push_back(&actions[posted]);
    if (a.kind == Kind::RecvActivation || a.kind == Kind::RecvGradient) {
      EXPECT_GT(posted, i) << describe(a) << " posted after its place";
    }
    if (!a.is_compute()) continue;
    most = std::max(most, int(waiting.size()));
    const Kind reads = a.kind == Kind::Forward ? Kind::RecvActivation : Kind::RecvGradient;
    const auto read = [&](const PipelineAction* r) { return r->kind == reads && r->micro_batch == a.micro_batch && r->chunk == a.chunk; };
    waiting.erase(std::remove_if(waiting.begin(), waiting.end(), read), waiting.end());
  }
  EXPECT_TRUE(waiting.empty()) << waiting.size() << " receive(s) never read";
  return most;
}

// A rank's receive buffers do not grow with the micro-batches of a step: posted a compute ahead, at
// most two wait at once (one being read, one for the next compute), three under interleaved 1F1B
// (whose middle ranks read an activation and a gradient from the same neighbour back to back), where
// posting all of them at the step's start held 2m on a middle rank.
TEST(PipelineSchedule, ReceivesPostedAComputeAheadWaitTwoAtMostWhateverTheMicroBatches) {
  for (const auto& [kind, name] : kScheduleNames)
    for (int pp = 2; pp <= 8; ++pp)
      for (int v = 1; v <= 2; ++v)
        for (int m = 1; m <= 32; ++m) {
          if (!accepted(kind, pp, v, m)) continue;
          const PipelineSchedule s = make_schedule(kind, pp, v, m);
          const int most = kind == ScheduleKind::Interleaved1F1B ? 3 : 2;
          for (int r = 0; r < pp; ++r)
            ASSERT_LE(most_receives_waiting(s.actions[size_t(r)]), most) << name << " pp " << pp << " v " << v << " m " << m << " rank " << r;
        }
}

// The sends `rank` holds at once, each from its action until the compute sends_delivered_by names.
int most_sends_held(const PipelineSchedule& s, int rank) {
  const std::vector<PipelineAction>& actions = s.actions[size_t(rank)];
  const std::vector<size_t> delivered_by = sends_delivered_by(s, rank);
  int held = 0, most = 0;
  for (size_t i = 0; i < actions.size(); ++i) {
    held -= int(std::count(delivered_by.begin(), delivered_by.end(), i));
    if (actions[i].is_send()) most = std::max(most, ++held);
  }
  return most;
}

// Nor do its sends: each is let go once a later message from its peer shows the peer read it, so
// a rank holds no more sends at 32 micro-batches than at 2·pp, where holding each to the step's end
// held m (and 2m on a middle rank). GPipe runs every forward first, and holds them all until its
// backwards begin.
TEST(PipelineSchedule, SendsAreLetGoOnceThePeerHasReadThemWhateverTheMicroBatches) {
  for (const auto& [kind, name] : kScheduleNames) {
    if (kind == ScheduleKind::GPipe) continue;
    for (int pp = 2; pp <= 8; ++pp)
      for (int v = 1; v <= 2; ++v) {
        if (!accepted(kind, pp, v, 32)) continue;
        const PipelineSchedule many = make_schedule(kind, pp, v, 32);
        for (int r = 0; r < pp; ++r) {
          int few = 0;
          for (int m = 1; m <= 2 * pp; ++m)
            if (accepted(kind, pp, v, m)) few = std::max(few, most_sends_held(make_schedule(kind, pp, v, m), r));
          ASSERT_LE(most_sends_held(many, r), few) << name << " pp " << pp << " v " << v << " rank " << r;
        }
      }
  }
}

TEST(PipelineSchedule, InterleavedHoldsMegatronsWarmUpPlusOneAndWeighsChunksByTheirBytes) {
  const PipelineSchedule s = make_schedule(ScheduleKind::Interleaved1F1B, 4, 2, 8);
  // Megatron's warm-up on rank r: (4 - r - 1)·2 + (2 - 1)·4 forwards, then one more before a backward.
  EXPECT_EQ(peak_in_flight(s), (std::vector<int64_t>{11, 9, 7, 5}));
  // Chunk c weighing 10^c shows which chunks are held at the peak: rank 0 holds 7 micro-batches in
  // chunk 0 and 4 in chunk 4, its second.
  std::vector<int64_t> weights;
  for (int c = 0, w = 1; c < s.chunks(); ++c, w *= 10) weights.push_back(w);
  EXPECT_EQ(peak_in_flight(s, weights)[0], 4 * 10000 + 7);
}

// A schedule with one thing broken, and the violation the checker must name.
PipelineSchedule broken(ScheduleKind kind, int pp, int v, int m, const std::function<void(PipelineSchedule&)>& breakage) {
  PipelineSchedule s = make_schedule(kind, pp, v, m);
  breakage(s);
  return s;
}

void erase_if(std::vector<PipelineAction>& list, const std::function<bool(const PipelineAction&)>& which) {
  list.erase(std::remove_if(list.begin(), list.end(), which), list.end());
}

TEST(ScheduleCheck, ABrokenScheduleFailsNamingItsFirstViolation) {
  // A dropped micro-batch: its F and B on the last rank, and the messages to and from it.
  EXPECT_EQ(check_schedule(broken(ScheduleKind::OneFOneB, 2, 1, 4,
                                  [](PipelineSchedule& s) {
                                    for (auto& list : s.actions) erase_if(list, [](const PipelineAction& a) { return a.micro_batch == 3; });
                                  })),
            "rank 0: F(mb 3, chunk 0) is missing");
  // A send before the forward that produces it.
  EXPECT_EQ(check_schedule(broken(ScheduleKind::GPipe, 2, 1, 3,
                                  [](PipelineSchedule& s) { std::swap(s.actions[0][1].micro_batch, s.actions[0][3].micro_batch); })),
            "rank 0: send_act(mb 1, chunk 0 -> rank 1) comes before F(mb 1, chunk 0), which produces it");
  // Two sends to one peer swapped, each still after its forward: the receiver expects them the other way round.
  EXPECT_EQ(check_schedule(broken(ScheduleKind::GPipe, 2, 1, 3,
                                  [](PipelineSchedule& s) {
                                    auto& l = s.actions[0];  // F0 send0 F1 send1 ... becomes F0 F1 send1 send0
                                    std::swap(l[1], l[2]);
                                    std::swap(l[2], l[3]);
                                  })),
            "channel rank 0 -> rank 1: send #0 is send_act(mb 1, chunk 0 -> rank 1) but receive #0 is "
            "recv_act(mb 0, chunk 1 <- rank 0)");
  // A backward before its forward.
  EXPECT_EQ(check_schedule(broken(ScheduleKind::OneFOneB, 1, 1, 2, [](PipelineSchedule& s) { std::swap(s.actions[0][0], s.actions[0][1]); })),
            "rank 0: B(mb 0, chunk 0) comes before F(mb 0, chunk 0), which needs its activations");
  // Rank 1 sends micro-batch 0's gradient before taking micro-batch 1's activation, while rank 0 sends
  // that activation before taking the gradient: each blocks on the other.
  EXPECT_EQ(check_schedule(broken(ScheduleKind::OneFOneB, 2, 1, 3, [](PipelineSchedule& s) { std::swap(s.actions[1][3], s.actions[1][4]); })),
            "deadlock under blocking sends: rank 0 at send_act(mb 1, chunk 0 -> rank 1), rank 1 at send_grad(mb 0, chunk 1 -> rank 0)");
  // More in flight than 1F1B allows: rank 0 running GPipe's order under 1F1B's name.
  EXPECT_EQ(check_schedule(broken(ScheduleKind::OneFOneB, 2, 1, 4,
                                  [](PipelineSchedule& s) { s.actions = make_schedule(ScheduleKind::GPipe, 2, 1, 4).actions; })),
            "rank 0: 4 micro-batches in flight at once, above 1f1b's 2");
  // A message between chunks on one rank, which hand over locally.
  EXPECT_EQ(check_schedule(broken(ScheduleKind::Interleaved1F1B, 1, 2, 2,
                                  [](PipelineSchedule& s) { s.actions[0].insert(s.actions[0].begin() + 1, {Kind::SendActivation, 0, 0, 0}); })),
            "rank 0: send_act(mb 0, chunk 0 -> rank 0) has no other rank to talk to");
}

TEST(PipelineSimulator, CommunicationCostDelaysEveryCrossRankDependency) {
  PipelineCosts costs;
  costs.backward = 1;
  costs.weight = 0;
  costs.comm = 0.5;
  // GPipe pp 2, m 1: F on rank 0 [0,1], F on rank 1 [1.5,2.5], B on rank 1 [2.5,3.5], B on rank 0 [4,5].
  const PipelineTimeline t = simulate_pipeline(make_schedule(ScheduleKind::GPipe, 2, 1, 1), costs);
  EXPECT_DOUBLE_EQ(t.makespan, 5);
  EXPECT_DOUBLE_EQ(t.ranks[1][0].start, 1.5);
  EXPECT_DOUBLE_EQ(t.ranks[0][1].start, 4);
}

TEST(PipelineSimulator, EachChunkRunsAtItsOwnCosts) {
  PipelineCosts first, last;  // the last chunk (the head's) twice as slow
  first.forward = 1, first.backward = 2, first.weight = 1;
  last.forward = 3, last.backward = 5, last.weight = 2;
  // GPipe pp 2, m 1 runs one action at a time: F 1 + F 3 + B 5 + B 2 = 11; rank 0 computes 3 of it, rank 1 8.
  const PipelineTimeline t = simulate_pipeline(make_schedule(ScheduleKind::GPipe, 2, 1, 1), std::vector<PipelineCosts>{first, last});
  EXPECT_DOUBLE_EQ(t.makespan, 11);
  EXPECT_DOUBLE_EQ(t.busy[0], 3);
  EXPECT_DOUBLE_EQ(t.busy[1], 8);
  EXPECT_DOUBLE_EQ(t.bubble_fraction, 0.5);
  // Equal costs per chunk time a schedule exactly as one cost for all.
  for (ScheduleKind kind : {ScheduleKind::OneFOneB, ScheduleKind::ZeroBubble}) {
    const PipelineSchedule s = make_schedule(kind, 4, 1, 8);
    EXPECT_DOUBLE_EQ(simulate_pipeline(s, std::vector<PipelineCosts>(4, first)).makespan, simulate_pipeline(s, first).makespan);
  }
  EXPECT_THROW(simulate_pipeline(make_schedule(ScheduleKind::GPipe, 2, 1, 1), std::vector<PipelineCosts>{first}), std::invalid_argument);
}

TEST(PipelineSimulator, CostsOutsideTheirRangeAreRefusedByName) {
  PipelineCosts costs;
  costs.weight = 2;
  EXPECT_THROW(costs.validate(), std::invalid_argument);
  costs = PipelineCosts{};
  costs.forward = 0;
  EXPECT_THROW(costs.validate(), std::invalid_argument);
  EXPECT_NO_THROW(PipelineCosts{}.validate());
}

}  // namespace
}  // namespace dtrain
