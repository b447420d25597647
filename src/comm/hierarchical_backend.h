// A group that spans nodes with the same number of members on each, run in two levels as NCCL and
// DeepSpeed do: the members of one node talk through their node's backend (shared memory), and
// across nodes only the members at the same local position talk, each carrying 1/local of the
// message (Gloo). All-reduce is a reduce-scatter within the node, an all-reduce of each shard
// across nodes and an all-gather within the node; all-gather, reduce-scatter and broadcast are split
// the same way. All-to-all and barrier use a flat group of every member; a point-to-point message
// to a peer on this node goes through the node's backend.
#pragma once
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <utility>
#include <vector>

#include "comm/task_queue.h"

namespace dtrain {

// Where a group's members run: members[node][local] is a group rank, nodes in order of their first
// member, members in group-rank order.
struct NodeLayout {
  std::vector<std::vector<int>> members;
  int node = 0;   // this member's node
  int local = 0;  // this member's position on it

  // `node_of[g]`: the node id of group rank g; `rank`: this member's group rank.
  static NodeLayout of(const std::vector<int>& node_of, int rank);
  // Two levels pay off: at least two nodes, the same number of members on each, more than one.
  bool hierarchical() const;
  // {node, local} of group rank g.
  std::pair<int, int> place(int g) const;
};

class HierarchicalBackend : public c10d::Backend {
 public:
  struct Levels {
    c10::intrusive_ptr<c10d::Backend> node;    // this node's members, ranked by local position
    c10::intrusive_ptr<c10d::Backend> across;  // the members at this local position, ranked by node
    c10::intrusive_ptr<c10d::Backend> flat;    // every member, ranked as the group
  };
  HierarchicalBackend(int rank, NodeLayout layout, Levels levels);

  // "shm+gloo": the node level's backend, then the one across nodes.
  const std::string getBackendName() const override { return name_; }

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
  using RedOp = c10d::ReduceOp::RedOpType;
  void all_reduce(at::Tensor t, RedOp op);
  void all_gather(const at::Tensor& in, at::Tensor out);
  void reduce_scatter(const at::Tensor& in, at::Tensor out, RedOp op);
  void broadcast(at::Tensor t, int root);
  // The node-level rank of a group rank on this node, or -1.
  int local_of(int group_rank) const;

  NodeLayout layout_;
  Levels levels_;
  std::string name_;
  TaskQueue collectives_{true};
};

}  // namespace dtrain
