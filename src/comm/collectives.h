// The collective vocabulary every parallelism speaks, in sync and async forms. Each call is numbered
// in its group and recorded (comm/collective_log.h); a failure or timeout comes back as an error
// that says which rank never arrived or entered a different op (comm/hang_diagnosis.h).
// Collectives take group ranks (0..group.size()-1), tensors must be contiguous, and a group of
// one returns at once.
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/group.h"

namespace dtrain {

enum class ReduceOp { Sum, Avg, Max, Min };

// An in-flight collective. wait() blocks until it is done, applies what the backend cannot do
// itself (averaging, the local reduction of reduce-scatter), and throws the diagnosed error if the
// collective failed or timed out. Waiting twice is harmless.
class CommHandle {
 public:
  struct State;
  CommHandle() = default;
  explicit CommHandle(std::shared_ptr<State> state) : state_(std::move(state)) {}
  void wait();
  bool completed() const;

 private:
  std::shared_ptr<State> state_;  // null for a handle that had nothing to do
};

void all_reduce(Group& g, at::Tensor& t, ReduceOp op = ReduceOp::Sum, const std::string& label = "");
CommHandle all_reduce_async(Group& g, at::Tensor t, ReduceOp op = ReduceOp::Sum, const std::string& label = "");

// Concatenation of every rank's `in` along dim 0, in group-rank order.
at::Tensor all_gather(Group& g, const at::Tensor& in, const std::string& label = "");
void all_gather(Group& g, const at::Tensor& in, at::Tensor& out, const std::string& label = "");
CommHandle all_gather_async(Group& g, const at::Tensor& in, at::Tensor out, const std::string& label = "");

// `in` is split along dim 0 into size() chunks; group rank r receives the reduction of chunk r.
at::Tensor reduce_scatter(Group& g, const at::Tensor& in, ReduceOp op = ReduceOp::Sum, const std::string& label = "");
void reduce_scatter(Group& g, const at::Tensor& in, at::Tensor& out, ReduceOp op = ReduceOp::Sum,
                    const std::string& label = "");
CommHandle reduce_scatter_async(Group& g, const at::Tensor& in, at::Tensor out, ReduceOp op = ReduceOp::Sum,
                                const std::string& label = "");

void broadcast(Group& g, at::Tensor& t, int root, const std::string& label = "");
// Each of `tensors` in turn, contiguous or not (a strided one goes through a contiguous copy).
void broadcast(Group& g, const std::vector<at::Tensor>& tensors, int root, const std::string& label = "");
CommHandle broadcast_async(Group& g, at::Tensor t, int root, const std::string& label = "");

void send(Group& g, const at::Tensor& t, int dst, const std::string& label = "");
void recv(Group& g, at::Tensor& t, int src, const std::string& label = "");
CommHandle send_async(Group& g, const at::Tensor& t, int dst, const std::string& label = "");
CommHandle recv_async(Group& g, at::Tensor t, int src, const std::string& label = "");

void barrier(Group& g, const std::string& label = "");

// `in` is split along dim 0 into size() chunks; chunk j goes to group rank j, and the result holds
// the chunks received, in source-rank order.
at::Tensor all_to_all(Group& g, const at::Tensor& in, const std::string& label = "");

}  // namespace dtrain
