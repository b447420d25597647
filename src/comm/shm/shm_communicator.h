// The collectives of one group whose members share a node, through a shared-memory segment
// (group_layout.h). Each collective streams its data in steps of at most one buffer per member:
// a member copies its share into its own buffer and raises its `arrived` flag; once all have
// arrived each reads what it needs from the others' buffers (all-reduce: each reduces one part,
// raises `reduced`, then everyone copies every part out) and raises `released`. Buffers alternate
// between two halves, so the copy-in of step k+1 overlaps the peers' reading of step k, and a member
// refills a half only after everyone has released it. Calls are synchronous; the backend
// (shm_backend.h) runs them on a worker thread for the async forms. One thread at a time may run
// collectives; point-to-point messages to or from different peers may run on other threads.
#pragma once
#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "comm/shm/group_layout.h"
#include "comm/shm/shared_segment.h"

namespace dtrain::shm {

enum class ShmOp : int32_t { AllReduce = 1, AllGather, ReduceScatter, Broadcast, AllToAll, Barrier };

struct ShmGroupOptions {
  std::string segment_name;         // unique to the job, its restart and the group
  std::vector<int> global_ranks;    // by group rank, for messages
  std::chrono::milliseconds timeout{300000};
  int64_t chunk_bytes = 1 << 19;    // each member's buffer half
  int64_t channel_bytes = 1 << 18;  // each point-to-point channel's half
  bool oversubscribed = false;      // more ranks than cores on this node: waiters yield (sequence_flag.h)
};

class ShmCommunicator {
 public:
  // Every member calls it with the same options; `store` (the group's) carries the hand-shake.
  ShmCommunicator(c10d::Store& store, int rank, ShmGroupOptions options);

  int rank() const { return rank_; }
  int size() const { return n_; }

  using RedOp = c10d::ReduceOp::RedOpType;  // SUM, MAX or MIN
  void all_reduce(at::Tensor& t, RedOp op);
  void all_gather(const at::Tensor& in, at::Tensor& out);  // out: size() inputs, by member
  void reduce_scatter(const at::Tensor& in, at::Tensor& out, RedOp op);  // in: size() * out.numel()
  void broadcast(at::Tensor& t, int root);
  void all_to_all(const at::Tensor& in, at::Tensor& out);
  void barrier();
  void send(const at::Tensor& t, int dst);
  void recv(at::Tensor& t, int src);

  // Makes every wait, now and later, give up with an error: the group is shutting down.
  void stop() { stopped_.store(true); }

 private:
  struct Op;  // one collective in progress: its descriptor, deadline and step bookkeeping
  Op begin(ShmOp kind, const at::Tensor& t, int64_t numel, RedOp reduce, int root);
  uint32_t begin_step(Op& op);                 // waits until this member's next half is free
  void wait_all(Op& op, SequenceFlag SlotHeader::*flag, uint32_t step);
  void check_descriptors(const Op& op);
  // The skeleton of every collective: `total` elements in steps of at most `cap`; for step k (of
  // `len` elements from `off`) fill() writes this member's half, then all arrive, then read() takes
  // what it needs from the halves, then this member releases them. At least one step, even for 0.
  using StepFn = std::function<void(uint32_t k, int64_t off, int64_t len)>;
  void run_steps(Op& op, int64_t total, int64_t cap, const StepFn& fill, const StepFn& read);
  char* half(int member, uint32_t step) const;  // the buffer half `member` uses in `step`
  void exchange_parts(Op& op, const at::Tensor& in, int64_t M,
                      const std::function<void(const std::vector<const char*>&, int64_t, int64_t)>& read);
  // `what` names the operation in errors; it is called only on one.
  void wait_peer(const SequenceFlag& flag, uint32_t target, int peer, c10::function_ref<std::string()> what,
                 std::chrono::steady_clock::time_point deadline);

  int rank_;
  int n_;
  ShmGroupOptions options_;
  GroupLayout layout_;
  SharedSegment segment_;
  std::atomic<bool> stopped_{false};
  uint32_t op_seq_ = 0;
  uint32_t step_ = 0;
  std::vector<uint32_t> sent_;      // chunks sent to each peer so far
  std::vector<uint32_t> received_;  // chunks received from each peer so far
};

}  // namespace dtrain::shm
