#include "tools/estimate/pipeline_stage.h"

#include <stdexcept>

#include "parallel/pipeline/pipeline_schedule.h"

namespace dtrain {

namespace {

using Kind = PipelineAction::Kind;

// Walks `rank`'s actions as the runner (pipeline_runner.h) keeps their tensors: a receive is posted
// a compute ahead (receives_posted_through) and its buffer lives until the compute that consumes it
// (a received activation then lives on as the chunk's saved input, counted with the activations);
// a send is held until the compute the schedule shows it delivered by (sends_delivered_by), before
// that compute runs, and an activation's, which is the chunk's output, at least through the backward
// that starts from it (the counting allocator's live tensors at the demo model's stage 0); a
// micro-batch's activations on a chunk live from its forward to its backward, under zero_bubble to
// its I, which leaves the micro-batch's weight-gradient store to its W (counted apart, step_peak.cpp).
std::vector<PipelineMoment> backward_moments(const PipelineSchedule& s, int rank) {
  const int v = s.virtual_stages;
  const auto local = [&](int chunk) { return chunk / s.pp; };
  std::vector<PipelineMoment> moments;
  PipelineMoment now;
  now.held.assign(size_t(v), 0);
  now.stored.assign(size_t(v), 0);
  now.backwards_done.assign(size_t(v), 0);
  const std::vector<PipelineAction>& actions = s.actions[size_t(rank)];
  // Per action index, the sends whose buffers go before that compute runs and after its moment.
  std::vector<int> freed_before(actions.size() + 1, 0), freed_after(actions.size() + 1, 0);
  const std::vector<size_t> delivered_by = sends_delivered_by(s, rank);
  // The backward that starts from an activation send's output (0 for a gradient send).
  auto backward_from = [&](size_t j) {
    const PipelineAction& sent = actions[j];
    for (size_t k = j; sent.kind == Kind::SendActivation && k < actions.size(); ++k) {
      const PipelineAction& b = actions[k];
      if ((b.kind == Kind::Backward || b.kind == Kind::BackwardInput) && b.micro_batch == sent.micro_batch && b.chunk == sent.chunk) return k;
    }
    return size_t(0);
  };
  for (size_t j = 0; j < actions.size(); ++j) {
    if (!actions[j].is_send()) continue;
    if (const size_t backward = backward_from(j); backward >= delivered_by[j]) {
      ++freed_after[backward];
    } else {
      ++freed_before[delivered_by[j]];
    }
  }
  size_t posted = 0;
  for (size_t i = 0; i < actions.size(); ++i) {
    const PipelineAction& a = actions[i];
    const size_t c = size_t(local(a.chunk));
    for (const size_t through = receives_posted_through(actions, i); posted < through; ++posted)
      if (actions[posted].kind == Kind::RecvActivation || actions[posted].kind == Kind::RecvGradient) ++now.buffers;
    now.buffers -= freed_before[i];
    switch (a.kind) {
      case Kind::Forward:
        ++now.held[c];
        if (a.chunk > 0 && s.rank_of(a.chunk - 1) != rank) --now.buffers;
        break;
      case Kind::Backward:
      case Kind::BackwardInput:
        now.chunk = int(c);
        moments.push_back(now);
        --now.held[c];
        ++now.backwards_done[c];
        if (a.kind == Kind::BackwardInput) ++now.stored[c];
        if (a.chunk < s.chunks() - 1 && s.rank_of(a.chunk + 1) != rank) --now.buffers;
        now.buffers -= freed_after[i];
        break;
      case Kind::BackwardWeight: --now.stored[c]; break;
      case Kind::SendActivation:
      case Kind::SendGradient: ++now.buffers; break;
      default: break;
    }
  }
  return moments;
}

}  // namespace

int PipelineStage::model_block(int i) const {
  for (const PipelineChunk& c : chunks) {
    if (i < c.blocks) return c.first_block + i;
    i -= c.blocks;
  }
  throw std::out_of_range("pipeline stage " + std::to_string(stage) + " holds no block " + std::to_string(i));
}

std::vector<int> chunk_blocks(const MemoryLayout& l) {
  const int C = l.pp * l.virtual_stages, L = l.model.n_layer;
  if (l.pp == 1) return {L};
  // A split "auto" is timed when a run starts; until then the blocks are spread evenly over the chunks.
  std::vector<int> split = l.split;
  if (int(split.size()) != C) {
    split.assign(size_t(C), L / C);
    for (int c = 0; c < L % C; ++c) ++split[size_t(c)];
  }
  return split;
}

std::vector<PipelineStage> pipeline_stages(const MemoryLayout& l) {
  const int pp = l.pp, m = int(l.accumulation), L = l.model.n_layer;
  if (pp == 1) return {PipelineStage{0, 1, L, true, true, 1, m, {PipelineChunk{0, L, true, true}}, {}}};
  const int v = l.virtual_stages, C = pp * v;
  const std::vector<int> split = chunk_blocks(l);
  const PipelineSchedule schedule = make_schedule(l.schedule, pp, v, m);
  const std::vector<int64_t> in_flight = peak_in_flight(schedule);
  std::vector<PipelineStage> stages;
  for (int s = 0; s < pp; ++s) {
    PipelineStage st;
    st.stage = s;
    st.pp = pp;
    st.first = s == 0;
    st.last = s == pp - 1;
    st.in_flight = int(in_flight[size_t(s)]);
    st.micro_batches = m;
    int first_block = 0;
    for (int c = 0; c < C; ++c) {
      if (schedule.rank_of(c) == s) st.chunks.push_back({first_block, split[size_t(c)], c == 0, c == C - 1});
      first_block += split[size_t(c)];
    }
    for (const PipelineChunk& c : st.chunks) st.blocks += c.blocks;
    st.moments = backward_moments(schedule, s);
    stages.push_back(std::move(st));
  }
  return stages;
}

}  // namespace dtrain
