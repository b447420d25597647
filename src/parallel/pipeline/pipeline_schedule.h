// A pipeline schedule as data: for each pp rank, the list of actions it runs in one training step
// (forward and backward of a micro-batch through a chunk of blocks, and the sends and receives between
// chunks on different ranks). Pure: nothing here communicates, so schedules are built, printed and
// checked without a process group, and one executor runs any of them.
//
// The model's blocks are cut into C = pp · virtual_stages chunks; chunk c lives on rank c % pp
// (Megatron's interleaving), chunk 0 holds the embedding and chunk C-1 the head and loss.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/pipeline/schedule_kind.h"

namespace dtrain {

struct PipelineAction {
  enum class Kind { Forward, Backward, BackwardInput, BackwardWeight, SendActivation, RecvActivation, SendGradient, RecvGradient };
  // Forward(mb,c) F; Backward(mb,c) B, the whole backward; zero_bubble splits B into BackwardInput I
  // (the input gradient, what the previous chunk waits for) and BackwardWeight W (the weight gradients
  // of (mb,c), deferred). SendActivation(mb,c): F(mb,c)'s output to rank_of(c+1); RecvActivation(mb,c):
  // F(mb,c)'s input from rank_of(c-1); SendGradient(mb,c): B/I(mb,c)'s input gradient to rank_of(c-1);
  // RecvGradient(mb,c): B/I(mb,c)'s output gradient from rank_of(c+1). Chunks on the same rank hand
  // over locally: no send or receive between them.
  Kind kind;
  int micro_batch;
  int chunk;
  int peer = -1;  // the pp rank at the other end of a send or receive; -1 for compute

  bool is_compute() const { return kind <= Kind::BackwardWeight; }
  bool is_send() const { return kind == Kind::SendActivation || kind == Kind::SendGradient; }
  bool operator==(const PipelineAction& o) const {
    return kind == o.kind && micro_batch == o.micro_batch && chunk == o.chunk && peer == o.peer;
  }
};

// "F", "B", "I", "W", "send_act", "recv_act", "send_grad", "recv_grad".
std::string action_kind_name(PipelineAction::Kind kind);
// "F(mb 3, chunk 1)", "send_act(mb 3, chunk 1 -> rank 2)".
std::string describe(const PipelineAction& action);

struct PipelineSchedule {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int pp = 1, virtual_stages = 1, micro_batches = 1;
  std::vector<std::vector<PipelineAction>> actions;  // per pp rank, in execution order

  int chunks() const { return pp * virtual_stages; }
  int rank_of(int chunk) const { return chunk % pp; }
};

// The schedule of `kind` for pp ranks, virtual_stages chunks per rank and micro_batches micro-batches
// per step. Throws std::invalid_argument naming the value it cannot take: gpipe, 1f1b and
// zero_bubble run one chunk per rank; interleaved_1f1b with virtual_stages > 1 needs micro_batches
// to be a multiple of pp (Megatron's condition: micro-batches go through the chunks in groups of pp),
// and with one chunk per rank is 1f1b. A send follows the compute that produces it and a receive
// precedes the one that consumes it; where two messages cross, one rank receives before it sends, so
// the lists run to their end even when sends block until their receive is reached.
PipelineSchedule make_schedule(ScheduleKind kind, int pp, int virtual_stages, int micro_batches);

// The most (micro-batch, chunk) pairs whose activations `rank` may hold at once under the schedule's
// design: gpipe m; 1f1b min(m, pp - rank); interleaved Megatron's warm-up forwards + 1; zero_bubble
// min(m, pp) on every rank (ZB-H1 keeps a micro-batch until its W: its pp in flight on every rank
// are 1F1B's peak, that of rank 0).
int in_flight_limit(const PipelineSchedule& schedule, int rank);
// How far ahead a rank posts its receives: on reaching `actions[i]`, every receive listed before the
// first compute after i (the list's end after the last) is posted. A transfer then lands while the
// rank computes the action before the one that reads it, and only the next compute's receives wait in
// buffers beside those being read, whatever the number of micro-batches; a receive is never posted
// after its place in the list, so the list's order still runs to its end under blocking sends. The
// index of that compute, or actions.size().
size_t receives_posted_through(const std::vector<PipelineAction>& actions, size_t i);
// Where `rank` can let go of each of its sends: at the compute that reads the first message its peer
// sent after the compute that read this send (messages between two ranks are read in order, so by
// then the peer has it), or at the list's end if no such message follows. Per index of the rank's
// actions: for a send, the index of that compute, or actions.size(); for any other action,
// actions.size(). Pure, like the schedule: the runner waits for (and drops) a send there, and the
// memory estimate counts its buffer until there.
std::vector<size_t> sends_delivered_by(const PipelineSchedule& schedule, int rank);

// Per rank, the peak over its action list of the sum of `chunk_weight[c]` over the (micro-batch,
// chunk c) pairs whose forward has run and whose activations are not yet released: by B, or under
// zero_bubble by W (W reads the inputs its layers saved, so a micro-batch's activations live until
// then). An empty `chunk_weight` counts each pair as 1: the peak number of micro-batches in flight,
// summed over the rank's chunks.
std::vector<int64_t> peak_in_flight(const PipelineSchedule& schedule, const std::vector<int64_t>& chunk_weight = {});

}  // namespace dtrain
