#include "parallel/pipeline/schedule_check.h"

#include <map>
#include <tuple>
#include <vector>

namespace dtrain {

using Kind = PipelineAction::Kind;

namespace {

std::string on_rank(int rank) { return "rank " + std::to_string(rank) + ": "; }

// Where each action is: (kind, micro-batch, chunk) -> (rank, position in its list).
using Key = std::tuple<Kind, int, int>;
using Where = std::pair<int, size_t>;

// The peer an action must name, or -1 for compute; a send or receive that has no peer (across the
// first or last chunk, or between chunks on one rank) gets -2, which no action names.
int expected_peer(const PipelineSchedule& s, const PipelineAction& a) {
  const int last = s.chunks() - 1, here = s.rank_of(a.chunk);
  int other = -2;
  switch (a.kind) {
    case Kind::SendActivation:
    case Kind::RecvGradient: other = a.chunk < last ? s.rank_of(a.chunk + 1) : -2; break;
    case Kind::RecvActivation:
    case Kind::SendGradient: other = a.chunk > 0 ? s.rank_of(a.chunk - 1) : -2; break;
    default: return -1;
  }
  return other == here ? -2 : other;
}

// Each action: a known kind for this schedule, on its chunk's rank, with the right peer, once.
std::string check_actions(const PipelineSchedule& s, std::map<Key, Where>& where) {
  const bool split = s.kind == ScheduleKind::ZeroBubble;
  for (int r = 0; r < s.pp; ++r)
    for (size_t i = 0; i < s.actions[r].size(); ++i) {
      const PipelineAction& a = s.actions[r][i];
      if (a.micro_batch < 0 || a.micro_batch >= s.micro_batches || a.chunk < 0 || a.chunk >= s.chunks())
        return on_rank(r) + describe(a) + " names a micro-batch or chunk the schedule does not have";
      if (s.rank_of(a.chunk) != r) return on_rank(r) + describe(a) + " belongs to rank " + std::to_string(s.rank_of(a.chunk));
      if ((a.kind == Kind::Backward && split) || ((a.kind == Kind::BackwardInput || a.kind == Kind::BackwardWeight) && !split))
        return on_rank(r) + describe(a) + ": " + schedule_name(s.kind) + (split ? " splits B into I and W" : " does not split B");
      if (a.peer != expected_peer(s, a))
        return on_rank(r) + describe(a) + (expected_peer(s, a) == -2 ? " has no other rank to talk to" : " names the wrong peer");
      if (!where.emplace(Key{a.kind, a.micro_batch, a.chunk}, Where{r, i}).second) return on_rank(r) + describe(a) + " appears twice";
    }
  return "";
}

// Every action the step needs is there: F and B (or I and W) of each pair, and each message's two ends.
std::string check_complete(const PipelineSchedule& s, const std::map<Key, Where>& where) {
  const bool split = s.kind == ScheduleKind::ZeroBubble;
  for (int c = 0; c < s.chunks(); ++c)
    for (int mb = 0; mb < s.micro_batches; ++mb) {
      std::vector<Kind> needed{Kind::Forward};
      if (split) needed.insert(needed.end(), {Kind::BackwardInput, Kind::BackwardWeight});
      else needed.push_back(Kind::Backward);
      for (Kind k : {Kind::SendActivation, Kind::RecvActivation, Kind::SendGradient, Kind::RecvGradient})
        if (expected_peer(s, {k, mb, c}) >= 0) needed.push_back(k);
      for (Kind k : needed)
        if (!where.count({k, mb, c}))
          return on_rank(s.rank_of(c)) + describe({k, mb, c, expected_peer(s, {k, mb, c})}) + " is missing";
    }
  return "";
}

// `before` must come earlier than `after` in one rank's list (both present).
std::string check_before(const PipelineSchedule& s, const std::map<Key, Where>& where, const PipelineAction& before,
                         const PipelineAction& after, const std::string& why) {
  const auto b = where.find({before.kind, before.micro_batch, before.chunk});
  const auto a = where.find({after.kind, after.micro_batch, after.chunk});
  if (b == where.end() || a == where.end() || b->second.first != a->second.first || b->second.second < a->second.second) return "";
  const auto& list = s.actions[a->second.first];
  return on_rank(a->second.first) + describe(list[a->second.second]) + " comes before " + describe(list[b->second.second]) + ", " + why;
}

std::string check_order(const PipelineSchedule& s, const std::map<Key, Where>& where) {
  const bool split = s.kind == ScheduleKind::ZeroBubble;
  const Kind backward = split ? Kind::BackwardInput : Kind::Backward;
  for (int c = 0; c < s.chunks(); ++c)
    for (int mb = 0; mb < s.micro_batches; ++mb) {
      std::vector<std::tuple<PipelineAction, PipelineAction, const char*>> rules{
          {{Kind::Forward, mb, c}, {backward, mb, c}, "which needs its activations"},
          {{Kind::RecvActivation, mb, c}, {Kind::Forward, mb, c}, "which consumes it"},
          {{Kind::Forward, mb, c}, {Kind::SendActivation, mb, c}, "which produces it"},
          {{Kind::RecvGradient, mb, c}, {backward, mb, c}, "which consumes it"},
          {{backward, mb, c}, {Kind::SendGradient, mb, c}, "which produces it"},
      };
      if (split) rules.push_back({{Kind::BackwardInput, mb, c}, {Kind::BackwardWeight, mb, c}, "which leaves it the output gradients"});
      if (c > 0) rules.push_back({{Kind::Forward, mb, c - 1}, {Kind::Forward, mb, c}, "whose output is its input"});
      if (c + 1 < s.chunks()) rules.push_back({{backward, mb, c + 1}, {backward, mb, c}, "whose input gradient it needs"});
      for (const auto& [before, after, why] : rules)
        if (auto error = check_before(s, where, before, after, why); !error.empty()) return error;
    }
  return "";
}

// The message a send or receive carries: (activation or gradient, micro-batch, the boundary between
// chunks b and b+1), the same at both ends.
std::tuple<bool, int, int> message_of(const PipelineAction& a) {
  switch (a.kind) {
    case Kind::SendActivation: return {true, a.micro_batch, a.chunk};
    case Kind::RecvActivation: return {true, a.micro_batch, a.chunk - 1};
    case Kind::SendGradient: return {false, a.micro_batch, a.chunk - 1};
    default: return {false, a.micro_batch, a.chunk};  // RecvGradient
  }
}

std::string check_channels(const PipelineSchedule& s) {
  // (src, dst) -> the sends src makes to dst, and the receives dst posts from src, in list order.
  std::map<std::pair<int, int>, std::pair<std::vector<PipelineAction>, std::vector<PipelineAction>>> channels;
  for (int r = 0; r < s.pp; ++r)
    for (const PipelineAction& a : s.actions[r])
      if (!a.is_compute()) {
        if (a.is_send()) channels[{r, a.peer}].first.push_back(a);
        else channels[{a.peer, r}].second.push_back(a);
      }
  for (const auto& [pair, ends] : channels) {
    const auto& [sends, recvs] = ends;
    for (size_t i = 0; i < sends.size() && i < recvs.size(); ++i)
      if (message_of(sends[i]) != message_of(recvs[i]))
        return "channel rank " + std::to_string(pair.first) + " -> rank " + std::to_string(pair.second) + ": send #" +
               std::to_string(i) + " is " + describe(sends[i]) + " but receive #" + std::to_string(i) + " is " + describe(recvs[i]);
  }
  return "";
}

// Runs the lists with blocking sends: compute always proceeds, a send only together with its receive
// at the head of the peer's list. Ranks stuck at their heads with work left are a deadlock.
std::string check_rendezvous(const PipelineSchedule& s) {
  std::vector<size_t> next(s.pp, 0);
  auto head = [&](int r) { return next[r] < s.actions[r].size() ? &s.actions[r][next[r]] : nullptr; };
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < s.pp; ++r)
      for (const PipelineAction* a = head(r); a; a = head(r)) {
        if (a->is_compute()) {
          ++next[r];
        } else if (const PipelineAction* b = a->is_send() ? head(a->peer) : nullptr;
                   b && !b->is_compute() && !b->is_send() && b->peer == r && message_of(*a) == message_of(*b)) {
          ++next[r];
          ++next[a->peer];
        } else {
          break;
        }
        progress = true;
      }
  }
  std::string stuck;
  for (int r = 0; r < s.pp; ++r)
    if (const PipelineAction* a = head(r)) stuck += (stuck.empty() ? "" : ", ") + ("rank " + std::to_string(r) + " at " + describe(*a));
  return stuck.empty() ? "" : "deadlock under blocking sends: " + stuck;
}

std::string check_in_flight(const PipelineSchedule& s) {
  const std::vector<int64_t> peaks = peak_in_flight(s);
  for (int r = 0; r < s.pp; ++r)
    if (peaks[r] > in_flight_limit(s, r))
      return on_rank(r) + std::to_string(peaks[r]) + " micro-batches in flight at once, above " + schedule_name(s.kind) + "'s " +
             std::to_string(in_flight_limit(s, r));
  return "";
}

}  // namespace

std::string check_schedule(const PipelineSchedule& s) {
  if (s.pp < 1 || s.virtual_stages < 1 || s.micro_batches < 1) return "pp, virtual stages and micro-batches must be at least 1";
  if (int(s.actions.size()) != s.pp)
    return "the schedule has action lists for " + std::to_string(s.actions.size()) + " ranks, not pp " + std::to_string(s.pp);
  std::map<Key, Where> where;
  std::string error = check_actions(s, where);
  if (error.empty()) error = check_complete(s, where);
  if (error.empty()) error = check_order(s, where);
  if (error.empty()) error = check_channels(s);
  if (error.empty()) error = check_rendezvous(s);
  if (error.empty()) error = check_in_flight(s);
  return error;
}

}  // namespace dtrain
