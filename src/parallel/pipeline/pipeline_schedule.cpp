#include "parallel/pipeline/pipeline_schedule.h"

#include <algorithm>
#include <stdexcept>


namespace dtrain {

using Kind = PipelineAction::Kind;

std::string action_kind_name(Kind kind) {
  switch (kind) {
    case Kind::Forward: return "F";
    case Kind::Backward: return "B";
    case Kind::BackwardInput: return "I";
    case Kind::BackwardWeight: return "W";
    case Kind::SendActivation: return "send_act";
    case Kind::RecvActivation: return "recv_act";
    case Kind::SendGradient: return "send_grad";
    case Kind::RecvGradient: return "recv_grad";
  }
  return "?";
}

std::string describe(const PipelineAction& a) {
  std::string out = action_kind_name(a.kind) + "(mb " + std::to_string(a.micro_batch) + ", chunk " + std::to_string(a.chunk);
  if (a.kind == Kind::SendActivation || a.kind == Kind::SendGradient) out += " -> rank " + std::to_string(a.peer);
  if (a.kind == Kind::RecvActivation || a.kind == Kind::RecvGradient) out += " <- rank " + std::to_string(a.peer);
  return out + ")";
}

namespace {

PipelineAction compute(Kind kind, int mb, int chunk) { return {kind, mb, chunk, -1}; }

// Megatron's count of forwards rank `rank` runs before its first backward in the interleaved
// schedule: the deeper the rank, the sooner the first gradient reaches it; every chunk but the last
// adds a round of pp.
int interleaved_warmup(int pp, int v, int m, int rank) { return std::min((pp - rank - 1) * 2 + (v - 1) * pp, m * v); }

std::vector<PipelineAction> gpipe_order(int m, int rank) {
  std::vector<PipelineAction> out;
  for (int mb = 0; mb < m; ++mb) out.push_back(compute(Kind::Forward, mb, rank));
  for (int mb = 0; mb < m; ++mb) out.push_back(compute(Kind::Backward, mb, rank));
  return out;
}

// Warm-up forwards (pp - rank - 1, as picotron writes it), then one forward and one backward in
// turn, then the remaining backwards: rank r holds at most pp - r micro-batches.
std::vector<PipelineAction> one_f_one_b_order(int pp, int m, int rank) {
  const int warmup = std::min(pp - rank - 1, m);
  std::vector<PipelineAction> out;
  for (int mb = 0; mb < warmup; ++mb) out.push_back(compute(Kind::Forward, mb, rank));
  for (int i = 0; i < m - warmup; ++i) {
    out.push_back(compute(Kind::Forward, warmup + i, rank));
    out.push_back(compute(Kind::Backward, i, rank));
  }
  for (int mb = m - warmup; mb < m; ++mb) out.push_back(compute(Kind::Backward, mb, rank));
  return out;
}

// Megatron's interleaved 1F1B: the k-th forward of a rank takes micro-batch (k / (pp·v))·pp + k % pp
// through its local chunk (k % (pp·v)) / pp, so groups of pp micro-batches pass each local chunk in
// turn; backwards walk the local chunks in reverse.
std::vector<PipelineAction> interleaved_order(int pp, int v, int m, int rank) {
  const int total = m * v, warmup = interleaved_warmup(pp, v, m, rank);
  auto micro_batch = [&](int k) { return (k / (pp * v)) * pp + k % pp; };
  auto local_chunk = [&](int k) { return (k % (pp * v)) / pp; };
  auto forward = [&](int k) { return compute(Kind::Forward, micro_batch(k), local_chunk(k) * pp + rank); };
  auto backward = [&](int k) { return compute(Kind::Backward, micro_batch(k), (v - 1 - local_chunk(k)) * pp + rank); };
  std::vector<PipelineAction> out;
  for (int k = 0; k < warmup; ++k) out.push_back(forward(k));
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(forward(warmup + k));
    out.push_back(backward(k));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(backward(k));
  return out;
}

// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", 2023): pp - rank warm-up forwards, then per
// micro-batch k its I, the W of micro-batch k - rank and the next forward, then the Ws left. Rank r
// thus holds its last r + 1 Ws until after its last I: the deeper ranks return their input gradients
// early, and rank 0's cool-down waits for them with weight gradients to do instead of idling. Each
// rank holds at most pp micro-batches (F done, W not), 1F1B's peak; with F = I = W the bubble is a
// third of 1F1B's, (p-1)·(F+I-W) per rank.
std::vector<PipelineAction> zero_bubble_order(int pp, int m, int rank) {
  const int warmup = std::min(pp - rank, m);
  std::vector<PipelineAction> out;
  int forwards = 0, weights = 0;
  for (; forwards < warmup; ++forwards) out.push_back(compute(Kind::Forward, forwards, rank));
  for (int mb = 0; mb < m; ++mb) {
    out.push_back(compute(Kind::BackwardInput, mb, rank));
    if (mb >= rank) out.push_back(compute(Kind::BackwardWeight, weights++, rank));
    if (forwards < m) out.push_back(compute(Kind::Forward, forwards++, rank));
  }
  for (; weights < m; ++weights) out.push_back(compute(Kind::BackwardWeight, weights, rank));
  return out;
}

// The receive that matches send `a`.
PipelineAction receive_of(const PipelineAction& a, int rank) {
  if (a.kind == Kind::SendActivation) return {Kind::RecvActivation, a.micro_batch, a.chunk + 1, rank};
  return {Kind::RecvGradient, a.micro_batch, a.chunk - 1, rank};
}

// Each message's two ends around the compute-only lists: a send right after the compute that
// produces it, a receive right before the compute that consumes it, which suits an executor that
// sends asynchronously and receives into buffers posted early, whatever the actions cost.
void add_messages(PipelineSchedule& s) {
  const int last = s.chunks() - 1;
  for (int r = 0; r < s.pp; ++r) {
    std::vector<PipelineAction> out;
    for (const PipelineAction& a : s.actions[r]) {
      const bool backward = a.kind == Kind::Backward || a.kind == Kind::BackwardInput;
      if (a.kind == Kind::Forward && a.chunk > 0 && s.rank_of(a.chunk - 1) != r)
        out.push_back({Kind::RecvActivation, a.micro_batch, a.chunk, s.rank_of(a.chunk - 1)});
      if (backward && a.chunk < last && s.rank_of(a.chunk + 1) != r)
        out.push_back({Kind::RecvGradient, a.micro_batch, a.chunk, s.rank_of(a.chunk + 1)});
      out.push_back(a);
      if (a.kind == Kind::Forward && a.chunk < last && s.rank_of(a.chunk + 1) != r)
        out.push_back({Kind::SendActivation, a.micro_batch, a.chunk, s.rank_of(a.chunk + 1)});
      if (backward && a.chunk > 0 && s.rank_of(a.chunk - 1) != r)
        out.push_back({Kind::SendGradient, a.micro_batch, a.chunk, s.rank_of(a.chunk - 1)});
    }
    s.actions[r] = std::move(out);
  }
}

// Makes the lists run to their end even when every send blocks until its receive is reached: runs
// them so, and where they stick, brings forward the receive of a rank's stuck send to the place where
// its receiver is stuck. Both ends of two crossing messages (rank r sends an activation to r+1 while
// r+1 sends a gradient to r, 1F1B's steady state) get a consistent order this way: what Megatron's
// batched send-and-receive does in one call. A receive only moves earlier, so it still precedes its
// consumer, and the fewest computes it passes keeps the ranks from waiting at it: the simulated
// bubbles stay the closed forms for any ratio of B to F. Throws std::logic_error if no rank is stuck
// at a send, which a compute order that runs with asynchronous sends cannot produce.
void resolve_rendezvous(PipelineSchedule& s) {
  std::vector<size_t> next(s.pp, 0);
  auto head = [&](int r) { return next[r] < s.actions[r].size() ? &s.actions[r][next[r]] : nullptr; };
  while (true) {
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < s.pp; ++r)
        for (const PipelineAction* a = head(r); a; a = head(r)) {
          if (a->is_compute()) {
            ++next[r];
          } else if (const PipelineAction* b = a->is_send() ? head(a->peer) : nullptr; b && *b == receive_of(*a, r)) {
            ++next[r];
            ++next[a->peer];
          } else {
            break;
          }
          progress = true;
        }
    }
    // Of the stuck sends, the one whose receive moves past the fewest computes: a receive brought
    // forward makes its rank wait for the data before doing what it passes.
    int stuck_sender = -1;
    std::ptrdiff_t fewest = 0;
    std::vector<PipelineAction>::iterator receive;
    for (int r = 0; r < s.pp; ++r) {
      if (!head(r) || !head(r)->is_send()) continue;
      auto& list = s.actions[head(r)->peer];
      const auto from = list.begin() + next[head(r)->peer];
      const auto found = std::find(from, list.end(), receive_of(*head(r), r));
      if (found == list.end()) throw std::logic_error("pipeline schedule: " + describe(*head(r)) + " has no receive");
      const auto passed = std::count_if(from, found, [](const PipelineAction& a) { return a.is_compute(); });
      if (stuck_sender < 0 || passed < fewest) {
        stuck_sender = r;
        fewest = passed;
        receive = found;
      }
    }
    if (stuck_sender < 0) {
      for (int r = 0; r < s.pp; ++r)
        if (head(r)) throw std::logic_error("pipeline schedule: rank " + std::to_string(r) + " waits forever at " + describe(*head(r)));
      return;
    }
    const int receiver = head(stuck_sender)->peer;
    auto& list = s.actions[receiver];
    std::rotate(list.begin() + next[receiver], receive, receive + 1);
  }
}

}  // namespace

PipelineSchedule make_schedule(ScheduleKind kind, int pp, int virtual_stages, int micro_batches) {
  const std::string name = schedule_name(kind);
  if (pp < 1) throw std::invalid_argument("pp must be at least 1, got " + std::to_string(pp));
  if (micro_batches < 1) throw std::invalid_argument("micro-batches must be at least 1, got " + std::to_string(micro_batches));
  if (virtual_stages < 1) throw std::invalid_argument("virtual stages must be at least 1, got " + std::to_string(virtual_stages));
  if (kind != ScheduleKind::Interleaved1F1B && virtual_stages != 1)
    throw std::invalid_argument("the " + name + " schedule runs one chunk per rank, so virtual stages must be 1, got " +
                                std::to_string(virtual_stages) + " (interleaved_1f1b takes more)");
  if (kind == ScheduleKind::Interleaved1F1B && virtual_stages > 1 && micro_batches % pp != 0)
    throw std::invalid_argument("interleaved_1f1b with " + std::to_string(virtual_stages) + " virtual stages needs micro-batches " +
                                "that are a multiple of pp (" + std::to_string(pp) + "), got " + std::to_string(micro_batches));
  PipelineSchedule s;
  s.kind = kind;
  s.pp = pp;
  s.virtual_stages = virtual_stages;
  s.micro_batches = micro_batches;
  for (int r = 0; r < pp; ++r) {
    switch (kind) {
      case ScheduleKind::GPipe: s.actions.push_back(gpipe_order(micro_batches, r)); break;
      case ScheduleKind::OneFOneB: s.actions.push_back(one_f_one_b_order(pp, micro_batches, r)); break;
      case ScheduleKind::Interleaved1F1B:
        s.actions.push_back(virtual_stages == 1 ? one_f_one_b_order(pp, micro_batches, r)
                                                : interleaved_order(pp, virtual_stages, micro_batches, r));
        break;
      case ScheduleKind::ZeroBubble: s.actions.push_back(zero_bubble_order(pp, micro_batches, r)); break;
    }
  }
  add_messages(s);
  resolve_rendezvous(s);
  return s;
}

size_t receives_posted_through(const std::vector<PipelineAction>& actions, size_t i) {
  size_t next = i + 1;
  while (next < actions.size() && !actions[next].is_compute()) ++next;
  return next;
}

namespace {

// The index of the compute on `actions` that reads receive `r` (its forward for an activation, its
// backward or input-gradient pass for a gradient).
size_t reader_of(const std::vector<PipelineAction>& actions, const PipelineAction& r) {
  for (size_t i = 0; i < actions.size(); ++i) {
    const PipelineAction& a = actions[i];
    if (a.micro_batch != r.micro_batch || a.chunk != r.chunk) continue;
    if (r.kind == Kind::RecvActivation ? a.kind == Kind::Forward : a.kind == Kind::Backward || a.kind == Kind::BackwardInput) return i;
  }
  throw std::logic_error("pipeline schedule: nothing reads " + describe(r));
}

}  // namespace

std::vector<size_t> sends_delivered_by(const PipelineSchedule& s, int rank) {
  const std::vector<PipelineAction>& mine = s.actions[size_t(rank)];
  std::vector<size_t> out(mine.size(), mine.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    if (!mine[i].is_send()) continue;
    const std::vector<PipelineAction>& peer = s.actions[size_t(mine[i].peer)];
    for (size_t j = reader_of(peer, receive_of(mine[i], rank)) + 1; j < peer.size(); ++j) {
      if (peer[j].is_send() && peer[j].peer == rank) {
        out[i] = reader_of(mine, receive_of(peer[j], mine[i].peer));
        break;
      }
    }
  }
  return out;
}

int in_flight_limit(const PipelineSchedule& s, int rank) {
  const int m = s.micro_batches;
  switch (s.kind) {
    case ScheduleKind::GPipe: return m;
    case ScheduleKind::OneFOneB: return std::min(m, s.pp - rank);
    case ScheduleKind::Interleaved1F1B:
      if (s.virtual_stages == 1) return std::min(m, s.pp - rank);
      return std::min(m * s.virtual_stages, interleaved_warmup(s.pp, s.virtual_stages, m, rank) + 1);
    case ScheduleKind::ZeroBubble: return std::min(m, s.pp);
  }
  return 0;
}

std::vector<int64_t> peak_in_flight(const PipelineSchedule& s, const std::vector<int64_t>& chunk_weight) {
  const Kind release = s.kind == ScheduleKind::ZeroBubble ? Kind::BackwardWeight : Kind::Backward;
  auto weight = [&](int chunk) -> int64_t { return chunk_weight.empty() ? 1 : chunk_weight.at(chunk); };
  std::vector<int64_t> peaks;
  for (const auto& list : s.actions) {
    int64_t held = 0, peak = 0;
    for (const PipelineAction& a : list) {
      if (a.kind == Kind::Forward) peak = std::max(peak, held += weight(a.chunk));
      if (a.kind == release) held -= weight(a.chunk);
    }
    peaks.push_back(peak);
  }
  return peaks;
}

}  // namespace dtrain
