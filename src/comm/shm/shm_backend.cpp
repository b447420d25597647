#include "comm/shm/shm_backend.h"

#include <stdexcept>

namespace dtrain::shm {
namespace {

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* op) {
  if (tensors.size() != 1) throw std::invalid_argument(std::string("shared-memory ") + op + " takes one tensor");
  if (!tensors[0].device().is_cpu() || !tensors[0].is_contiguous())
    throw std::invalid_argument(std::string("shared-memory ") + op + " needs a contiguous tensor in host memory");
  return tensors[0];
}

}  // namespace

ShmBackend::ShmBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, ShmGroupOptions options)
    : c10d::Backend(rank, static_cast<int>(options.global_ranks.size())),
      comm_(std::make_unique<ShmCommunicator>(*store, rank, std::move(options))) {}

ShmBackend::~ShmBackend() {
  // Whatever still waits on a peer gives up, so the queues' threads can be joined.
  comm_->stop();
}

TaskQueue& ShmBackend::p2p_queue(int peer, bool sending) {
  std::lock_guard<std::mutex> lock(p2p_mutex_);
  auto& q = p2p_[{peer, sending}];
  if (!q) q = std::make_unique<TaskQueue>(false);
  return *q;
}

c10::intrusive_ptr<c10d::Work> ShmBackend::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  at::Tensor t = single(tensors, "all_reduce");
  const auto op = opts.reduceOp.op_;
  return collectives_.run(opts.asyncOp, [this, t, op]() mutable { comm_->all_reduce(t, op); });
}

c10::intrusive_ptr<c10d::Work> ShmBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                            const c10d::AllgatherOptions& opts) {
  at::Tensor in = single({input}, "all_gather"), out = single({output}, "all_gather");
  if (out.numel() != in.numel() * getSize() || out.scalar_type() != in.scalar_type())
    throw std::invalid_argument("shared-memory all_gather: the output must hold size() inputs of the input's dtype");
  return collectives_.run(opts.asyncOp, [this, in, out]() mutable { comm_->all_gather(in, out); });
}

c10::intrusive_ptr<c10d::Work> ShmBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::ReduceScatterOptions& opts) {
  at::Tensor in = single({input}, "reduce_scatter"), out = single({output}, "reduce_scatter");
  const auto op = opts.reduceOp.op_;
  return collectives_.run(opts.asyncOp, [this, in, out, op]() mutable { comm_->reduce_scatter(in, out, op); });
}

c10::intrusive_ptr<c10d::Work> ShmBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                          std::vector<int64_t>& output_splits,
                                                          std::vector<int64_t>& input_splits,
                                                          const c10d::AllToAllOptions& opts) {
  if (!output_splits.empty() || !input_splits.empty())
    throw std::invalid_argument("shared-memory all_to_all supports equal splits only");
  at::Tensor in = single({input}, "all_to_all"), out = single({output}, "all_to_all");
  return collectives_.run(opts.asyncOp, [this, in, out]() mutable { comm_->all_to_all(in, out); });
}

c10::intrusive_ptr<c10d::Work> ShmBackend::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  at::Tensor t = single(tensors, "broadcast");
  const int root = static_cast<int>(opts.rootRank);
  return collectives_.run(opts.asyncOp, [this, t, root]() mutable { comm_->broadcast(t, root); });
}

c10::intrusive_ptr<c10d::Work> ShmBackend::barrier(const c10d::BarrierOptions& opts) {
  return collectives_.run(opts.asyncOp, [this] { comm_->barrier(); });
}

c10::intrusive_ptr<c10d::Work> ShmBackend::send(std::vector<at::Tensor>& tensors, int dst, int /*tag*/) {
  at::Tensor t = single(tensors, "send");
  return p2p_queue(dst, true).submit([this, t, dst] { comm_->send(t, dst); });
}

c10::intrusive_ptr<c10d::Work> ShmBackend::recv(std::vector<at::Tensor>& tensors, int src, int /*tag*/) {
  at::Tensor t = single(tensors, "recv");
  return p2p_queue(src, false).submit([this, t, src]() mutable { comm_->recv(t, src); });
}

}  // namespace dtrain::shm
