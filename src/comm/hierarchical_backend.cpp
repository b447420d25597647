#include "comm/hierarchical_backend.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace dtrain {
namespace {

// Each level runs synchronously inside the composite's task; a level's error propagates from wait().
void finish(const c10::intrusive_ptr<c10d::Work>& work) { work->wait(); }

template <class Options>
Options sync(Options o) {
  o.asyncOp = false;
  return o;
}

c10d::AllreduceOptions reduce_opts(c10d::ReduceOp::RedOpType op) {
  c10d::AllreduceOptions o;
  o.reduceOp = op;
  return sync(o);
}

c10d::ReduceScatterOptions scatter_opts(c10d::ReduceOp::RedOpType op) {
  c10d::ReduceScatterOptions o;
  o.reduceOp = op;
  return sync(o);
}

c10d::BroadcastOptions broadcast_opts(int root) {
  c10d::BroadcastOptions o;
  o.rootRank = root;
  return sync(o);
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* op) {
  if (tensors.size() != 1 || !tensors[0].is_contiguous())
    throw std::invalid_argument(std::string("hierarchical ") + op + " takes one contiguous tensor");
  return tensors[0];
}

}  // namespace

NodeLayout NodeLayout::of(const std::vector<int>& node_of, int rank) {
  NodeLayout layout;
  std::vector<int> ids;
  for (int g = 0; g < static_cast<int>(node_of.size()); ++g) {
    auto it = std::find(ids.begin(), ids.end(), node_of[g]);
    const int k = static_cast<int>(it - ids.begin());
    if (it == ids.end()) {
      ids.push_back(node_of[g]);
      layout.members.emplace_back();
    }
    if (g == rank) {
      layout.node = k;
      layout.local = static_cast<int>(layout.members[k].size());
    }
    layout.members[k].push_back(g);
  }
  return layout;
}

bool NodeLayout::hierarchical() const {
  if (members.size() < 2 || members[0].size() < 2) return false;
  for (const auto& m : members)
    if (m.size() != members[0].size()) return false;
  return true;
}

std::pair<int, int> NodeLayout::place(int g) const {
  for (size_t k = 0; k < members.size(); ++k)
    for (size_t l = 0; l < members[k].size(); ++l)
      if (members[k][l] == g) return {int(k), int(l)};
  throw std::out_of_range("group rank " + std::to_string(g) + " is not in the layout");
}

HierarchicalBackend::HierarchicalBackend(int rank, NodeLayout layout, Levels levels)
    : c10d::Backend(rank, static_cast<int>(layout.members.size() * layout.members[0].size())),
      layout_(std::move(layout)),
      levels_(std::move(levels)),
      name_(levels_.node->getBackendName() + "+" + levels_.across->getBackendName()) {}

int HierarchicalBackend::local_of(int group_rank) const {
  const auto [node, local] = layout_.place(group_rank);
  return node == layout_.node ? local : -1;
}

// Padded to a multiple of the local size so each position owns an equal shard; the pad is reduced
// among itself and dropped.
void HierarchicalBackend::all_reduce(at::Tensor t, RedOp op) {
  const int64_t local_size = static_cast<int64_t>(layout_.members[0].size()), numel = t.numel();
  if (numel == 0) return;
  const int64_t shard_numel = (numel + local_size - 1) / local_size;
  at::Tensor flat = t.view({-1});
  at::Tensor whole = shard_numel * local_size == numel
                         ? flat
                         : at::cat({flat, at::zeros({shard_numel * local_size - numel}, t.options())});
  std::vector<at::Tensor> shard{at::empty({shard_numel}, t.options())};
  finish(levels_.node->_reduce_scatter_base(shard[0], whole, scatter_opts(op)));
  finish(levels_.across->allreduce(shard, reduce_opts(op)));
  finish(levels_.node->_allgather_base(whole, shard[0], sync(c10d::AllgatherOptions())));
  if (!whole.is_same(flat)) flat.copy_(whole.slice(0, 0, numel));
}

// Across nodes first (each position gathers its own column), then within the node; the result
// arrives ordered [local][node] and is copied to the group's order.
void HierarchicalBackend::all_gather(const at::Tensor& in, at::Tensor out) {
  const int64_t nodes = static_cast<int64_t>(layout_.members.size()), local_size = layout_.members[0].size();
  const int64_t numel = in.numel();
  if (numel == 0) return;
  at::Tensor input = in.view({-1});
  at::Tensor column = at::empty({nodes * numel}, in.options());
  finish(levels_.across->_allgather_base(column, input, sync(c10d::AllgatherOptions())));
  at::Tensor everything = at::empty({local_size * nodes * numel}, in.options());
  finish(levels_.node->_allgather_base(everything, column, sync(c10d::AllgatherOptions())));
  at::Tensor by_member = out.view({-1, numel}), arrived = everything.view({local_size, nodes, numel});
  for (int64_t k = 0; k < nodes; ++k)
    for (int64_t l = 0; l < local_size; ++l) by_member[layout_.members[k][l]].copy_(arrived[l][k]);
}

// The parts are reordered [local][node] so the node-level reduce-scatter leaves each position the
// parts of its column, whose across-node reduce-scatter leaves each member its own part.
void HierarchicalBackend::reduce_scatter(const at::Tensor& in, at::Tensor out, RedOp op) {
  const int64_t nodes = static_cast<int64_t>(layout_.members.size()), local_size = layout_.members[0].size();
  const int64_t part = out.numel();
  if (part == 0) return;
  std::vector<int64_t> order;
  for (int64_t l = 0; l < local_size; ++l)
    for (int64_t k = 0; k < nodes; ++k) order.push_back(layout_.members[k][l]);
  at::Tensor arranged = in.view({-1, part}).index_select(0, at::tensor(order, at::kLong).to(in.device())).view({-1});
  at::Tensor column = at::empty({nodes * part}, in.options());
  finish(levels_.node->_reduce_scatter_base(column, arranged, scatter_opts(op)));
  at::Tensor flat_out = out.view({-1});
  finish(levels_.across->_reduce_scatter_base(flat_out, column, scatter_opts(op)));
}

// The root's column gets it across nodes, then every node spreads it from that position.
void HierarchicalBackend::broadcast(at::Tensor t, int root) {
  if (t.numel() == 0) return;
  const auto [root_node, root_local] = layout_.place(root);
  std::vector<at::Tensor> v{t};
  if (layout_.local == root_local) finish(levels_.across->broadcast(v, broadcast_opts(root_node)));
  finish(levels_.node->broadcast(v, broadcast_opts(root_local)));
}

c10::intrusive_ptr<c10d::Work> HierarchicalBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                              const c10d::AllreduceOptions& opts) {
  at::Tensor t = single(tensors, "all_reduce");
  const auto op = opts.reduceOp.op_;
  return collectives_.run(opts.asyncOp, [this, t, op] { all_reduce(t, op); });
}

c10::intrusive_ptr<c10d::Work> HierarchicalBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                    const c10d::AllgatherOptions& opts) {
  at::Tensor in = single({input}, "all_gather"), out = single({output}, "all_gather");
  return collectives_.run(opts.asyncOp, [this, in, out] { all_gather(in, out); });
}

c10::intrusive_ptr<c10d::Work> HierarchicalBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                         const c10d::ReduceScatterOptions& opts) {
  at::Tensor in = single({input}, "reduce_scatter"), out = single({output}, "reduce_scatter");
  const auto op = opts.reduceOp.op_;
  return collectives_.run(opts.asyncOp, [this, in, out, op] { reduce_scatter(in, out, op); });
}

c10::intrusive_ptr<c10d::Work> HierarchicalBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                              const c10d::BroadcastOptions& opts) {
  at::Tensor t = single(tensors, "broadcast");
  const int root = static_cast<int>(opts.rootRank);
  return collectives_.run(opts.asyncOp, [this, t, root] { broadcast(t, root); });
}

c10::intrusive_ptr<c10d::Work> HierarchicalBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                  std::vector<int64_t>& output_splits,
                                                                  std::vector<int64_t>& input_splits,
                                                                  const c10d::AllToAllOptions& opts) {
  auto flat = levels_.flat;
  return collectives_.run(opts.asyncOp, [=]() mutable {
    finish(flat->alltoall_base(output, input, output_splits, input_splits, sync(opts)));
  });
}

c10::intrusive_ptr<c10d::Work> HierarchicalBackend::barrier(const c10d::BarrierOptions& opts) {
  auto flat = levels_.flat;
  return collectives_.run(opts.asyncOp, [=] { finish(flat->barrier(sync(opts))); });
}

c10::intrusive_ptr<c10d::Work> HierarchicalBackend::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  const int local = local_of(dst);
  return local >= 0 ? levels_.node->send(tensors, local, tag) : levels_.flat->send(tensors, dst, tag);
}

c10::intrusive_ptr<c10d::Work> HierarchicalBackend::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  const int local = local_of(src);
  return local >= 0 ? levels_.node->recv(tensors, local, tag) : levels_.flat->recv(tensors, src, tag);
}

}  // namespace dtrain
