// The shared-memory communicator behind c10d's Backend interface, so groups and the collective
// helpers (comm/collectives.h) use it exactly as they use Gloo or NCCL. Collectives run in order on
// one queue: async ones on its worker thread, synchronous ones (asyncOp false) on the caller's
// thread. Point-to-point messages run on a queue per peer and direction, so a send and the recv it
// waits for never block each other.
#pragma once
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <map>
#include <memory>
#include <mutex>

#include "comm/shm/shm_communicator.h"
#include "comm/task_queue.h"

namespace dtrain::shm {

class ShmBackend : public c10d::Backend {
 public:
  ShmBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, ShmGroupOptions options);
  ~ShmBackend() override;

  const std::string getBackendName() const override { return "shm"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;

 private:
  TaskQueue& p2p_queue(int peer, bool sending);

  std::unique_ptr<ShmCommunicator> comm_;
  TaskQueue collectives_{true};
  std::mutex p2p_mutex_;
  std::map<std::pair<int, bool>, std::unique_ptr<TaskQueue>> p2p_;
};

}  // namespace dtrain::shm
