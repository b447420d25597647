#include "parallel/pipeline/pipeline_simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "common/number_text.h"

namespace dtrain {

using Kind = PipelineAction::Kind;

void PipelineCosts::validate() const {
  auto bad = [](double x) { return !std::isfinite(x); };
  if (bad(forward) || forward <= 0) throw std::invalid_argument("F must be a number above 0, got " + plain(forward));
  if (bad(backward) || backward <= 0) throw std::invalid_argument("B must be a number above 0, got " + plain(backward));
  if (bad(weight) || weight < 0 || weight >= backward)
    throw std::invalid_argument("W must be at least 0 and below B (" + plain(backward) + "), since I = B - W; got " +
                                plain(weight));
  if (bad(comm) || comm < 0) throw std::invalid_argument("the communication cost must be at least 0, got " + plain(comm));
}

double PipelineCosts::of(Kind kind) const {
  switch (kind) {
    case Kind::Forward: return forward;
    case Kind::Backward: return backward;
    case Kind::BackwardInput: return input();
    case Kind::BackwardWeight: return weight;
    default: return 0;
  }
}

double PipelineTimeline::idle_time() const {
  double idle = 0;
  for (double b : busy) idle += makespan - b;
  return idle;
}

namespace {

// End times of compute actions by (kind, micro-batch, chunk); NaN until the action has run.
class EndTimes {
 public:
  EndTimes(int micro_batches, int chunks)
      : m_(micro_batches), c_(chunks), end_(size_t(4) * micro_batches * chunks, std::numeric_limits<double>::quiet_NaN()) {}
  double& at(Kind kind, int mb, int chunk) { return end_[(size_t(kind) * m_ + mb) * c_ + chunk]; }
  bool done(Kind kind, int mb, int chunk) { return !std::isnan(at(kind, mb, chunk)); }

 private:
  int m_, c_;
  std::vector<double> end_;
};

struct Dependency {
  Kind kind;
  int chunk;
};

// What compute action `a` waits for besides its rank's previous action.
std::vector<Dependency> dependencies_of(const PipelineAction& a, int chunks) {
  switch (a.kind) {
    case Kind::Forward:
      if (a.chunk > 0) return {{Kind::Forward, a.chunk - 1}};
      return {};
    case Kind::Backward:
    case Kind::BackwardInput:
      if (a.chunk < chunks - 1) return {{Kind::Forward, a.chunk}, {a.kind, a.chunk + 1}};
      return {{Kind::Forward, a.chunk}};
    case Kind::BackwardWeight: return {{Kind::BackwardInput, a.chunk}};
    default: return {};
  }
}

// A message's key, the same at both ends: (activation or gradient, micro-batch, boundary b between
// chunks b and b+1).
size_t message_index(const PipelineAction& a, int micro_batches, int chunks) {
  const bool activation = a.kind == Kind::SendActivation || a.kind == Kind::RecvActivation;
  const int boundary = a.kind == Kind::SendActivation || a.kind == Kind::RecvGradient ? a.chunk : a.chunk - 1;
  return (size_t(activation) * micro_batches + a.micro_batch) * chunks + boundary;
}

}  // namespace

PipelineTimeline simulate_pipeline(const PipelineSchedule& s, const PipelineCosts& costs) {
  return simulate_pipeline(s, std::vector<PipelineCosts>(size_t(s.chunks()), costs));
}

PipelineTimeline simulate_pipeline(const PipelineSchedule& s, const std::vector<PipelineCosts>& per_chunk) {
  const int chunks = s.chunks();
  if (int(per_chunk.size()) != chunks)
    throw std::invalid_argument("pipeline costs for " + std::to_string(per_chunk.size()) + " chunk(s), the schedule has " +
                                std::to_string(chunks));
  EndTimes end(s.micro_batches, chunks);
  // When each message was sent: a rank posts a send when it reaches it in its list.
  std::vector<double> sent(size_t(2) * s.micro_batches * chunks, std::numeric_limits<double>::quiet_NaN());
  PipelineTimeline t;
  t.ranks.resize(s.pp);
  t.busy.assign(s.pp, 0);
  std::vector<size_t> next(s.pp, 0);
  std::vector<double> free_at(s.pp, 0);
  // Sweep the ranks, running every action whose inputs exist, until a sweep runs nothing.
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < s.pp; ++r) {
      const auto& list = s.actions[r];
      for (; next[r] < list.size(); ++next[r], progress = true) {
        const PipelineAction& a = list[next[r]];
        if (a.is_send()) {
          sent[message_index(a, s.micro_batches, chunks)] = free_at[r];
          continue;
        }
        if (a.kind == Kind::RecvActivation || a.kind == Kind::RecvGradient) {  // the executor waits here for the data
          const double at = sent[message_index(a, s.micro_batches, chunks)];
          if (std::isnan(at)) break;
          free_at[r] = std::max(free_at[r], at + per_chunk[size_t(a.chunk)].comm);
          continue;
        }
        double start = free_at[r];
        bool ready = true;
        for (const Dependency& d : dependencies_of(a, chunks)) {
          if (!end.done(d.kind, a.micro_batch, d.chunk)) {
            ready = false;
            break;
          }
          start = std::max(start, end.at(d.kind, a.micro_batch, d.chunk) + (s.rank_of(d.chunk) == r ? 0 : per_chunk[size_t(a.chunk)].comm));
        }
        if (!ready) break;
        const double cost = per_chunk[size_t(a.chunk)].of(a.kind);
        end.at(a.kind, a.micro_batch, a.chunk) = free_at[r] = start + cost;
        t.ranks[r].push_back({a, start, start + cost});
        t.busy[r] += cost;
      }
    }
  }
  for (int r = 0; r < s.pp; ++r)
    if (next[r] < s.actions[r].size())
      throw std::invalid_argument("pipeline rank " + std::to_string(r) + " waits forever at " + describe(s.actions[r][next[r]]) +
                                  ": what it waits for never comes");
  t.makespan = *std::max_element(free_at.begin(), free_at.end());
  t.bubble_fraction = t.makespan > 0 ? t.idle_time() / (s.pp * t.makespan) : 0;
  t.peak_in_flight = peak_in_flight(s);
  return t;
}

double closed_form_bubble(ScheduleKind kind, int pp, int virtual_stages, int micro_batches, const PipelineCosts& costs) {
  const double p = pp, m = micro_batches, v = virtual_stages;
  switch (kind) {
    case ScheduleKind::GPipe:
    case ScheduleKind::OneFOneB: return (p - 1) / (m + p - 1);
    case ScheduleKind::Interleaved1F1B: return (p - 1) / (v * m + p - 1);
    case ScheduleKind::ZeroBubble:
      // Qi et al.'s (p-1)(F+I-W) idle per rank is what the handcrafted ZB-H1 reaches when F = I = W, the
      // costs it is laid out for, and once rank 0 has pp micro-batches to start with; elsewhere no
      // formula describes it, and the simulator is the answer.
      if (micro_batches < pp || costs.forward != costs.input() || costs.forward != costs.weight) break;
      return (p - 1) / (3 * m + p - 1);
  }
  return std::numeric_limits<double>::quiet_NaN();
}

std::string closed_form_text(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::GPipe:
    case ScheduleKind::OneFOneB: return "(p-1)/(m+p-1)";
    case ScheduleKind::Interleaved1F1B: return "(p-1)/(v*m+p-1)";
    case ScheduleKind::ZeroBubble: return "(p-1)/(3m+p-1), for F = I = W and m >= p";
  }
  return "?";
}

}  // namespace dtrain
