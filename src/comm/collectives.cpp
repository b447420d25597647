#include "comm/collectives.h"

#include <ATen/core/grad_mode.h>

#include <chrono>
#include <stdexcept>

#include "comm/chrome_trace.h"

namespace dtrain {

struct CommHandle::State {
  Group* group = nullptr;
  CollectiveRecord record;
  c10::intrusive_ptr<c10d::Work> work;
  std::function<void()> finish;  // runs after the backend is done: averaging, local reductions
  std::chrono::steady_clock::time_point start;
  std::chrono::steady_clock::duration blocked{};  // in starting and waiting: the timeline slice's args
  bool done = false;
};

namespace {

// The op's slice on the rank's timeline (comm/chrome_trace.h), from its start to now.
void trace_op(Group& g, const CommHandle::State& s) {
  const std::shared_ptr<ChromeTrace> trace = g.log().trace();
  if (!trace) return;
  nlohmann::json args = {{"group", g.name()}, {"blocked_us", std::chrono::duration<double, std::micro>(s.blocked).count()}};
  if (!s.record.label.empty()) args["label"] = s.record.label;
  if (s.record.seq > 0) args["seq"] = s.record.seq;
  args["shape"] = s.record.shape;  // what was sent: the elements an op carries, as the collective log records them
  args["dtype"] = s.record.dtype;
  trace->record(s.record.label.empty() ? s.record.op : s.record.op + " " + s.record.label, "comm", s.start,
                std::chrono::steady_clock::now(), std::move(args));
}

}  // namespace

void CommHandle::wait() {
  if (!state_ || state_->done) return;
  State& s = *state_;
  Group& g = *s.group;
  const auto waiting = std::chrono::steady_clock::now();
  try {
    s.work->wait();
    s.blocked += std::chrono::steady_clock::now() - waiting;
    g.add_waited(std::chrono::steady_clock::now() - waiting);
  } catch (const std::exception& e) {
    s.done = true;
    g.log().set_state(g.key(), s.record.seq, s.record.op, OpState::Failed);
    FailedCollective f;
    f.group_key = g.key();
    f.group_name = g.name();
    f.ranks = g.ranks();
    f.failing_rank = g.global_rank();
    f.op = s.record;
    f.waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - s.start).count();
    f.backend_error = e.what();
    throw std::runtime_error(g.diagnosis().diagnose(f));
  }
  s.done = true;
  g.log().set_state(g.key(), s.record.seq, s.record.op, OpState::Completed);
  if (s.finish) s.finish();
  trace_op(g, s);
}

bool CommHandle::completed() const { return !state_ || state_->done || state_->work->isCompleted(); }

namespace {

std::vector<int64_t> shape_of(const at::Tensor& t) { return t.sizes().vec(); }

void check_tensor(const Group& g, const char* op, const at::Tensor& t) {
  if (!t.is_contiguous())
    throw std::invalid_argument(std::string(op) + " on group " + g.name() + ": the tensor must be contiguous");
}

void check_peer(const Group& g, const char* op, int peer) {
  if (peer < 0 || peer >= g.size() || peer == g.rank())
    throw std::invalid_argument(std::string(op) + " on group " + g.name() + ": rank " + std::to_string(peer) +
                                " is not another member of the group (its ranks are 0.." + std::to_string(g.size() - 1) +
                                ", this one is " + std::to_string(g.rank()) + ")");
}

// Gloo moves a point-to-point op's bytes with the host's socket calls, which cannot read or write
// device memory (writev fails with "Bad address"); its collectives stage device tensors through the
// host themselves, its sends and receives do not. Ranks that share a GPU talk over Gloo, so there a
// device tensor travels through a host copy. NCCL reads device memory.
bool staged_through_host(const Group& g, const at::Tensor& t) { return !t.device().is_cpu() && g.backend_name() != "nccl"; }

c10d::ReduceOp backend_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:  // Gloo has no average: sum, then divide in finish
      return c10d::ReduceOp::SUM;
    case ReduceOp::Max: return c10d::ReduceOp::MAX;
    case ReduceOp::Min: return c10d::ReduceOp::MIN;
  }
  return c10d::ReduceOp::SUM;
}

// Records the op as entered and starts it; `launch` returns the backend's work.
CommHandle start(Group& g, std::string op, const at::Tensor& t, const std::string& label, bool numbered,
                 const std::function<c10::intrusive_ptr<c10d::Work>()>& launch, std::function<void()> finish = {}) {
  auto s = std::make_shared<CommHandle::State>();
  s->group = &g;
  s->record.seq = numbered ? g.next_seq() : 0;
  s->record.op = std::move(op);
  s->record.shape = shape_of(t);
  s->record.dtype = dtype_name(t.scalar_type());
  s->record.label = label;
  s->finish = std::move(finish);
  s->start = std::chrono::steady_clock::now();
  g.log().record(g.key(), s->record);
  try {
    s->work = launch();
    // A backend that runs a collective the caller waits for at once on the caller's thread has
    // finished it here: that time is waited for too.
    s->blocked = std::chrono::steady_clock::now() - s->start;
    g.add_waited(s->blocked);
  } catch (const std::exception& e) {
    g.log().set_state(g.key(), s->record.seq, s->record.op, OpState::Failed);
    std::string what = e.what();
    throw std::runtime_error(s->record.describe() + " on group " + g.name() + " failed to start on rank " +
                             std::to_string(g.global_rank()) + ": " + what.substr(0, what.find('\n')));
  }
  return CommHandle(s);
}

// `async` tells the backend whether the caller waits at once: the shared-memory backend then runs the
// collective on the caller's thread instead of handing it to its worker.
CommHandle all_reduce_start(Group& g, at::Tensor t, ReduceOp op, const std::string& label, bool async) {
  if (g.size() == 1) return {};
  check_tensor(g, "all_reduce", t);
  if (op == ReduceOp::Avg && !at::isFloatingType(t.scalar_type()))
    throw std::invalid_argument("all_reduce avg on group " + g.name() + " needs a floating-point tensor");
  const int n = g.size();
  std::function<void()> finish;
  if (op == ReduceOp::Avg) finish = [t, n]() mutable { t.div_(n); };
  return start(
      g, "all_reduce", t, label, true,
      [&] {
        std::vector<at::Tensor> v{t};
        c10d::AllreduceOptions o;
        o.reduceOp = backend_op(op);
        o.asyncOp = async;
        return g.backend().allreduce(v, o);
      },
      std::move(finish));
}

CommHandle all_gather_start(Group& g, const at::Tensor& in, at::Tensor out, const std::string& label, bool async) {
  check_tensor(g, "all_gather", in);
  check_tensor(g, "all_gather", out);
  if (out.numel() != in.numel() * g.size())
    throw std::invalid_argument("all_gather on group " + g.name() + ": output has " + std::to_string(out.numel()) +
                                " elements, expected " + std::to_string(in.numel() * g.size()));
  if (g.size() == 1) {
    out.view_as(in).copy_(in);
    return {};
  }
  return start(g, "all_gather", in, label, true, [&] {
    c10d::AllgatherOptions o;
    o.asyncOp = async;
    // Both flat: Gloo reads the output as chunks shaped like the input, which a [1, n] input and a
    // flat output disagree on.
    at::Tensor flat_out = out.view({-1});
    at::Tensor flat_in = in.view({-1});
    return g.backend()._allgather_base(flat_out, flat_in, o);
  });
}

CommHandle reduce_scatter_start(Group& g, const at::Tensor& in, at::Tensor out, ReduceOp op, const std::string& label,
                                bool async) {
  check_tensor(g, "reduce_scatter", in);
  const int n = g.size();
  if (in.dim() == 0 || in.size(0) % n != 0)
    throw std::invalid_argument("reduce_scatter on group " + g.name() + ": dim 0 of the input (" +
                                (in.dim() ? std::to_string(in.size(0)) : std::string("scalar")) +
                                ") must divide into " + std::to_string(n) + " chunks");
  if (out.numel() != in.numel() / n)
    throw std::invalid_argument("reduce_scatter on group " + g.name() + ": output has " + std::to_string(out.numel()) +
                                " elements, expected " + std::to_string(in.numel() / n));
  if (n == 1) {
    out.copy_(in.view_as(out));
    return {};
  }
  std::function<void()> finish;
  if (op == ReduceOp::Avg) finish = [out, n]() mutable { out.div_(n); };
  return start(
      g, "reduce_scatter", in, label, true,
      [&] {
        c10d::ReduceScatterOptions o;
        o.reduceOp = backend_op(op);
        o.asyncOp = async;
        // Both flat: Gloo on device tensors checks dim 0 of the output against dim 0 of the input.
        at::Tensor flat_out = out.view({-1});
        at::Tensor flat_in = in.view({-1});
        return g.backend()._reduce_scatter_base(flat_out, flat_in, o);
      },
      std::move(finish));
}

CommHandle broadcast_start(Group& g, at::Tensor t, int root, const std::string& label, bool async) {
  if (root < 0 || root >= g.size())
    throw std::invalid_argument("broadcast on group " + g.name() + ": root " + std::to_string(root) +
                                " is not a group rank");
  if (g.size() == 1) return {};
  check_tensor(g, "broadcast", t);
  return start(g, "broadcast", t, label, true, [&] {
    std::vector<at::Tensor> v{t};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    o.asyncOp = async;
    return g.backend().broadcast(v, o);
  });
}

}  // namespace

CommHandle all_reduce_async(Group& g, at::Tensor t, ReduceOp op, const std::string& label) {
  return all_reduce_start(g, std::move(t), op, label, true);
}

void all_reduce(Group& g, at::Tensor& t, ReduceOp op, const std::string& label) {
  all_reduce_start(g, t, op, label, false).wait();
}

CommHandle all_gather_async(Group& g, const at::Tensor& in, at::Tensor out, const std::string& label) {
  return all_gather_start(g, in, std::move(out), label, true);
}

at::Tensor all_gather(Group& g, const at::Tensor& in, const std::string& label) {
  auto sizes = in.sizes().vec();
  if (sizes.empty()) sizes.push_back(1);
  sizes[0] *= g.size();
  at::Tensor out = at::empty(sizes, in.options());
  all_gather(g, in, out, label);
  return out;
}

void all_gather(Group& g, const at::Tensor& in, at::Tensor& out, const std::string& label) {
  all_gather_start(g, in, out, label, false).wait();
}

CommHandle reduce_scatter_async(Group& g, const at::Tensor& in, at::Tensor out, ReduceOp op, const std::string& label) {
  return reduce_scatter_start(g, in, std::move(out), op, label, true);
}

at::Tensor reduce_scatter(Group& g, const at::Tensor& in, ReduceOp op, const std::string& label) {
  auto sizes = in.sizes().vec();
  if (!sizes.empty()) sizes[0] /= g.size();
  at::Tensor out = at::empty(sizes, in.options());
  reduce_scatter(g, in, out, op, label);
  return out;
}

void reduce_scatter(Group& g, const at::Tensor& in, at::Tensor& out, ReduceOp op, const std::string& label) {
  reduce_scatter_start(g, in, out, op, label, false).wait();
}

CommHandle broadcast_async(Group& g, at::Tensor t, int root, const std::string& label) {
  return broadcast_start(g, std::move(t), root, label, true);
}

void broadcast(Group& g, at::Tensor& t, int root, const std::string& label) {
  broadcast_start(g, t, root, label, false).wait();
}

void broadcast(Group& g, const std::vector<at::Tensor>& tensors, int root, const std::string& label) {
  at::NoGradGuard no_grad;
  for (const at::Tensor& t : tensors) {
    at::Tensor contiguous = t.contiguous();
    broadcast(g, contiguous, root, label);
    if (!contiguous.is_same(t)) const_cast<at::Tensor&>(t).copy_(contiguous);
  }
}

CommHandle send_async(Group& g, const at::Tensor& t, int dst, const std::string& label) {
  check_tensor(g, "send", t);
  check_peer(g, "send", dst);
  const at::Tensor wire = staged_through_host(g, t) ? t.to(at::kCPU) : t;
  // Point-to-point ops involve two ranks, so they are recorded but not numbered: the group's
  // sequence must stay identical on every member.
  return start(
      g, "send->" + std::to_string(dst), t, label, false,
      [&] {
        std::vector<at::Tensor> v{wire};
        return g.backend().send(v, dst, 0);
      },
      [wire] {});  // the host copy lives until the send is done
}

CommHandle recv_async(Group& g, at::Tensor t, int src, const std::string& label) {
  check_tensor(g, "recv", t);
  check_peer(g, "recv", src);
  const bool staged = staged_through_host(g, t);
  at::Tensor wire = staged ? at::empty(t.sizes(), t.options().device(at::kCPU)) : t;
  std::function<void()> finish;
  if (staged) finish = [t, wire]() mutable { t.copy_(wire); };
  return start(
      g, "recv<-" + std::to_string(src), t, label, false,
      [&] {
        std::vector<at::Tensor> v{wire};
        return g.backend().recv(v, src, 0);
      },
      std::move(finish));
}

void send(Group& g, const at::Tensor& t, int dst, const std::string& label) { send_async(g, t, dst, label).wait(); }
void recv(Group& g, at::Tensor& t, int src, const std::string& label) { recv_async(g, t, src, label).wait(); }

void barrier(Group& g, const std::string& label) {
  if (g.size() == 1) return;
  start(g, "barrier", at::Tensor(at::empty({0})), label, true, [&] {
    c10d::BarrierOptions o;
    o.asyncOp = false;
    return g.backend().barrier(o);
  }).wait();
}

at::Tensor all_to_all(Group& g, const at::Tensor& in, const std::string& label) {
  check_tensor(g, "all_to_all", in);
  if (in.dim() == 0 || in.size(0) % g.size() != 0)
    throw std::invalid_argument("all_to_all on group " + g.name() + ": dim 0 must divide into " +
                                std::to_string(g.size()) + " chunks");
  at::Tensor out = at::empty_like(in);
  if (g.size() == 1) return out.copy_(in);
  start(g, "all_to_all", in, label, true, [&] {
    std::vector<int64_t> equal;
    c10d::AllToAllOptions o;
    o.asyncOp = false;
    return g.backend().alltoall_base(out, const_cast<at::Tensor&>(in), equal, equal, o);
  }).wait();
  return out;
}

}  // namespace dtrain
