#include "comm/shm/shm_communicator.h"

#include "comm/collective_log.h"
#include "comm/shm/reduce_buffers.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <new>
#include <stdexcept>

namespace dtrain::shm {
namespace {

const char* op_name(int32_t kind) {
  switch (static_cast<ShmOp>(kind)) {
    case ShmOp::AllReduce: return "all_reduce";
    case ShmOp::AllGather: return "all_gather";
    case ShmOp::ReduceScatter: return "reduce_scatter";
    case ShmOp::Broadcast: return "broadcast";
    case ShmOp::AllToAll: return "all_to_all";
    case ShmOp::Barrier: return "barrier";
  }
  return "unknown op";
}

std::string describe(const OpDescriptor& d) {
  std::string s = std::string(op_name(d.kind)) + " #" + std::to_string(d.op_seq);
  if (static_cast<ShmOp>(d.kind) == ShmOp::Barrier) return s;
  s += " of " + std::to_string(d.numel) + " " + dtype_name(static_cast<at::ScalarType>(d.dtype)) + " elements";
  if (static_cast<ShmOp>(d.kind) == ShmOp::Broadcast) s += " from root " + std::to_string(d.root);
  return s;
}

// A killed rank stays a zombie until its launcher reaps it, so signal 0 alone would call it alive.
bool alive(int pid) {
  if (pid <= 0) return true;  // not yet known
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const auto paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || (line[paren + 2] != 'Z' && line[paren + 2] != 'X');
}

// Up to this size an all-reduce is one step in which every member reduces everything (all_reduce).
constexpr int64_t kWholeReductionBytes = 16 << 10;

int64_t align_down(int64_t x, int64_t a) { return std::max(a, x / a * a); }

// Keeps every part of a step on its own cache lines (and vector-aligned for the reductions).
int64_t alignment(int64_t element_bytes) { return std::max<int64_t>(1, 64 / element_bytes); }

// A buffer must hold a cache line for every member: each member's part of a step starts on its own.
int64_t checked_bytes(int64_t bytes, int members) {
  if (bytes < 64 * members || bytes % 64 != 0)
    throw std::invalid_argument("shared-memory buffers of " + std::to_string(bytes) + " bytes: need a multiple of 64 of at least " +
                                std::to_string(64 * members));
  return bytes;
}

SharedSegment attach(c10d::Store& store, int rank, const ShmGroupOptions& o, const GroupLayout& layout) {
  const int n = static_cast<int>(o.global_ranks.size());
  SharedSegment seg = [&] {
    if (rank != 0) {
      store.wait({"shm/created"}, o.timeout);
      const auto created = store.get("shm/created");
      if (created != std::vector<uint8_t>{'1'})
        throw std::runtime_error("rank " + std::to_string(o.global_ranks.at(0)) + " (the group's first) could not create the group's shared memory: " +
                                 std::string(created.begin(), created.end()));
      return SharedSegment::open(o.segment_name, layout.bytes());
    }
    // The others learn why rank 0 failed at once, instead of waiting out the timeout for the segment.
    SharedSegment s = [&] {
      try {
        return SharedSegment::create(o.segment_name, layout.bytes());
      } catch (const std::exception& e) {
        const std::string why = e.what();
        store.set("shm/created", std::vector<uint8_t>(why.begin(), why.end()));
        throw;
      }
    }();
    auto* h = new (layout.header(s.data())) SegmentHeader();
    h->magic = kSegmentMagic;
    h->size = n;
    h->chunk_bytes = layout.chunk_bytes();
    h->channel_bytes = layout.channel_bytes();
    for (int r = 0; r < n; ++r) new (layout.slot(s.data(), r)) SlotHeader();
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) new (layout.channel(s.data(), a, b)) ChannelHeader();
    store.set("shm/created", std::vector<uint8_t>{'1'});
    return s;
  }();
  const SegmentHeader* h = layout.header(seg.data());
  if (h->magic != kSegmentMagic || h->size != n || h->chunk_bytes != layout.chunk_bytes() ||
      h->channel_bytes != layout.channel_bytes())
    throw std::runtime_error("shared-memory segment /dev/shm" + o.segment_name +
                             " was laid out for another group (size or buffer sizes differ)");
  layout.slot(seg.data(), rank)->pid.store(static_cast<int32_t>(getpid()));
  store.set("shm/mapped/" + std::to_string(rank), std::vector<uint8_t>{'1'});
  if (rank == 0) {
    std::vector<std::string> keys;
    for (int r = 1; r < n; ++r) keys.push_back("shm/mapped/" + std::to_string(r));
    store.wait(keys, o.timeout);
    // Every member holds a mapping now: the name has done its job.
    SharedSegment::remove(o.segment_name);
  }
  return seg;
}

}  // namespace

struct ShmCommunicator::Op {
  OpDescriptor desc;
  std::chrono::steady_clock::time_point deadline;
  bool checked = false;  // the peers' descriptors have been compared with this one
};

ShmCommunicator::ShmCommunicator(c10d::Store& store, int rank, ShmGroupOptions options)
    : rank_(rank),
      n_(static_cast<int>(options.global_ranks.size())),
      options_(std::move(options)),
      layout_(n_, checked_bytes(options_.chunk_bytes, n_), checked_bytes(options_.channel_bytes, 1)),
      segment_(attach(store, rank, options_, layout_)),
      sent_(n_, 0),
      received_(n_, 0) {}

void ShmCommunicator::wait_peer(const SequenceFlag& flag, uint32_t target, int peer,
                                c10::function_ref<std::string()> what, std::chrono::steady_clock::time_point deadline) {
  auto check = [&] {
    const std::string who = "rank " + std::to_string(options_.global_ranks[peer]);
    if (stopped_.load())
      throw std::runtime_error("shared-memory " + what() + " abandoned: the group is shutting down");
    const int pid = layout_.slot(segment_.data(), peer)->pid.load();
    if (!alive(pid))
      throw std::runtime_error(who + " (pid " + std::to_string(pid) + ") exited during shared-memory " + what());
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("Timed out waiting " + std::to_string(options_.timeout.count()) + "ms for " + who +
                               " in shared-memory " + what());
  };
  wait_for(flag, target, check, options_.oversubscribed);
}

ShmCommunicator::Op ShmCommunicator::begin(ShmOp kind, const at::Tensor& t, int64_t numel, RedOp reduce, int root) {
  if (reduce != c10d::ReduceOp::SUM && reduce != c10d::ReduceOp::MAX && reduce != c10d::ReduceOp::MIN)
    throw std::invalid_argument(std::string("shared-memory ") + op_name(static_cast<int32_t>(kind)) +
                                ": only sum, max and min reductions are supported");
  Op op;
  op.desc.op_seq = ++op_seq_;
  op.desc.kind = static_cast<int32_t>(kind);
  op.desc.dtype = static_cast<int32_t>(t.defined() ? t.scalar_type() : at::kByte);
  op.desc.reduce = static_cast<int32_t>(reduce);
  op.desc.numel = numel;
  op.desc.root = root;
  op.deadline = std::chrono::steady_clock::now() + options_.timeout;
  layout_.slot(segment_.data(), rank_)->ops[op.desc.op_seq % kDescriptorRing] = op.desc;
  return op;
}

uint32_t ShmCommunicator::begin_step(Op& op) {
  const uint32_t k = ++step_;
  // This member's half k&1 was last read by the peers in step k-2.
  wait_all(op, &SlotHeader::released, k - 2);
  return k;
}

void ShmCommunicator::wait_all(Op& op, SequenceFlag SlotHeader::*flag, uint32_t step) {
  auto what = [&] { return describe(op.desc); };
  for (int j = 0; j < n_; ++j)
    if (j != rank_) wait_peer(layout_.slot(segment_.data(), j)->*flag, step, j, what, op.deadline);
  if (flag == &SlotHeader::arrived && !op.checked) {
    check_descriptors(op);
    op.checked = true;
  }
}

void ShmCommunicator::check_descriptors(const Op& op) {
  for (int j = 0; j < n_; ++j) {
    if (j == rank_) continue;
    const OpDescriptor d = layout_.slot(segment_.data(), j)->ops[op.desc.op_seq % kDescriptorRing];
    const OpDescriptor& m = op.desc;
    if (d.op_seq != m.op_seq || d.kind != m.kind || d.dtype != m.dtype || d.numel != m.numel || d.root != m.root ||
        d.reduce != m.reduce)
      throw std::runtime_error("shared-memory collective mismatch: rank " + std::to_string(options_.global_ranks[j]) +
                               " entered " + describe(d) + " where rank " +
                               std::to_string(options_.global_ranks[rank_]) + " entered " + describe(m));
  }
}

void ShmCommunicator::run_steps(Op& op, int64_t total, int64_t cap, const StepFn& fill, const StepFn& read) {
  SlotHeader* mine = layout_.slot(segment_.data(), rank_);
  int64_t off = 0;
  do {
    const int64_t len = std::min(cap, total - off);
    const uint32_t k = begin_step(op);
    fill(k, off, len);
    mine->arrived.publish(k);
    wait_all(op, &SlotHeader::arrived, k);
    read(k, off, len);
    mine->released.publish(k);
    off += len;
  } while (off < total);
}

char* ShmCommunicator::half(int member, uint32_t step) const { return layout_.buffer(segment_.data(), member, step & 1); }

void ShmCommunicator::all_reduce(at::Tensor& t, RedOp red) {
  const int64_t N = t.numel(), e = t.element_size();
  Op op = begin(ShmOp::AllReduce, t, N, red, 0);
  const int64_t align = alignment(e);
  const int64_t part_cap = align_down(layout_.chunk_bytes() / n_ / e, align);
  char* data = static_cast<char*>(t.data_ptr());
  auto fill = [&](uint32_t k, int64_t off, int64_t len) { std::memcpy(half(rank_, k), data + off * e, len * e); };
  if (N * e <= std::min(kWholeReductionBytes, layout_.chunk_bytes())) {
    // Every member reduces the whole message straight from the halves, in the same order: reading n
    // small halves costs less than the second wait for all peers that splitting the work needs.
    run_steps(op, N, N, fill, [&](uint32_t k, int64_t, int64_t len) {
      std::vector<const char*> inputs;
      for (int j = 0; j < n_; ++j) inputs.push_back(half(j, k));
      if (len > 0) reduce_buffers(data, inputs, len, t.scalar_type(), red);
    });
    return;
  }
  auto read = [&](uint32_t k, int64_t off, int64_t len) {
    const int64_t part = std::min(part_cap, ((len + n_ - 1) / n_ + align - 1) / align * align);
    auto lo = [&](int j) { return std::min(len, j * part); };
    auto hi = [&](int j) { return std::min(len, (j + 1) * part); };
    if (hi(rank_) > lo(rank_)) {
      std::vector<const char*> inputs;
      for (int j = 0; j < n_; ++j) inputs.push_back(half(j, k) + lo(rank_) * e);
      reduce_buffers(half(rank_, k) + lo(rank_) * e, inputs, hi(rank_) - lo(rank_), t.scalar_type(), red);
    }
    layout_.slot(segment_.data(), rank_)->reduced.publish(k);
    wait_all(op, &SlotHeader::reduced, k);
    for (int j = 0; j < n_; ++j) std::memcpy(data + (off + lo(j)) * e, half(j, k) + lo(j) * e, (hi(j) - lo(j)) * e);
  };
  run_steps(op, N, part_cap * n_, fill, read);
}

void ShmCommunicator::all_gather(const at::Tensor& in, at::Tensor& out) {
  const int64_t N = in.numel(), e = in.element_size();
  Op op = begin(ShmOp::AllGather, in, N, c10d::ReduceOp::SUM, 0);
  const char* src = static_cast<const char*>(in.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  run_steps(
      op, N, std::max<int64_t>(1, layout_.chunk_bytes() / e),
      [&](uint32_t k, int64_t off, int64_t len) { std::memcpy(half(rank_, k), src + off * e, len * e); },
      [&](uint32_t k, int64_t off, int64_t len) {
        for (int j = 0; j < n_; ++j) std::memcpy(dst + (j * N + off) * e, half(j, k), len * e);
      });
}

// reduce_scatter and all_to_all share their steps: member j puts its piece of every destination's
// chunk (chunks of M elements) into part d of its buffer half, and `read` then takes what this member
// needs from part rank() of every half: read(parts, off, len) for elements [off, off+len) of a chunk.
void ShmCommunicator::exchange_parts(Op& op, const at::Tensor& in, int64_t M,
                                     const std::function<void(const std::vector<const char*>&, int64_t, int64_t)>& read) {
  const int64_t e = in.element_size();
  const int64_t cap = align_down(layout_.chunk_bytes() / n_ / e, alignment(e));
  const char* src = static_cast<const char*>(in.data_ptr());
  run_steps(
      op, M, cap,
      [&](uint32_t k, int64_t off, int64_t len) {
        for (int d = 0; d < n_; ++d) std::memcpy(half(rank_, k) + d * cap * e, src + (d * M + off) * e, len * e);
      },
      [&](uint32_t k, int64_t off, int64_t len) {
        std::vector<const char*> parts;
        for (int j = 0; j < n_; ++j) parts.push_back(half(j, k) + rank_ * cap * e);
        if (len > 0) read(parts, off, len);
      });
}

void ShmCommunicator::reduce_scatter(const at::Tensor& in, at::Tensor& out, RedOp red) {
  Op op = begin(ShmOp::ReduceScatter, in, in.numel(), red, 0);
  char* dst = static_cast<char*>(out.data_ptr());
  const int64_t e = in.element_size();
  exchange_parts(op, in, out.numel(), [&](const std::vector<const char*>& parts, int64_t off, int64_t len) {
    reduce_buffers(dst + off * e, parts, len, in.scalar_type(), red);
  });
}

void ShmCommunicator::all_to_all(const at::Tensor& in, at::Tensor& out) {
  Op op = begin(ShmOp::AllToAll, in, in.numel(), c10d::ReduceOp::SUM, 0);
  char* dst = static_cast<char*>(out.data_ptr());
  const int64_t e = in.element_size(), M = in.numel() / n_;
  exchange_parts(op, in, M, [&](const std::vector<const char*>& parts, int64_t off, int64_t len) {
    for (int j = 0; j < n_; ++j) std::memcpy(dst + (j * M + off) * e, parts[j], len * e);
  });
}

void ShmCommunicator::broadcast(at::Tensor& t, int root) {
  const int64_t N = t.numel(), e = t.element_size();
  Op op = begin(ShmOp::Broadcast, t, N, c10d::ReduceOp::SUM, root);
  char* data = static_cast<char*>(t.data_ptr());
  run_steps(
      op, N, std::max<int64_t>(1, layout_.chunk_bytes() / e),
      [&](uint32_t k, int64_t off, int64_t len) {
        if (rank_ == root) std::memcpy(half(rank_, k), data + off * e, len * e);
      },
      [&](uint32_t k, int64_t off, int64_t len) {
        if (rank_ != root) std::memcpy(data + off * e, half(root, k), len * e);
      });
}

void ShmCommunicator::barrier() {
  Op op = begin(ShmOp::Barrier, at::Tensor(), 0, c10d::ReduceOp::SUM, 0);
  auto nothing = [](uint32_t, int64_t, int64_t) {};
  run_steps(op, 0, 1, nothing, nothing);
}

void ShmCommunicator::send(const at::Tensor& t, int dst) {
  const int64_t M = t.nbytes(), P = layout_.channel_bytes();
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  auto what = [&] { return "send of " + std::to_string(M) + " bytes to rank " + std::to_string(options_.global_ranks[dst]); };
  ChannelHeader* ch = layout_.channel(segment_.data(), rank_, dst);
  const char* data = static_cast<const char*>(t.data_ptr());
  int64_t off = 0;
  do {
    const int64_t len = std::min(P, M - off);
    const uint32_t g = ++sent_[dst];
    const int half = g & 1;
    wait_peer(ch->acked, g - 2, dst, what, deadline);
    std::memcpy(layout_.channel_buffer(segment_.data(), rank_, dst, half), data + off, len);
    ch->message_bytes[half] = M;
    ch->sent.publish(g);
    off += len;
  } while (off < M);
}

void ShmCommunicator::recv(at::Tensor& t, int src) {
  const int64_t M = t.nbytes(), P = layout_.channel_bytes();
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  auto what = [&] { return "recv of " + std::to_string(M) + " bytes from rank " + std::to_string(options_.global_ranks[src]); };
  ChannelHeader* ch = layout_.channel(segment_.data(), src, rank_);
  char* data = static_cast<char*>(t.data_ptr());
  int64_t off = 0;
  do {
    const uint32_t g = ++received_[src];
    const int half = g & 1;
    wait_peer(ch->sent, g, src, what, deadline);
    if (ch->message_bytes[half] != M)
      throw std::runtime_error("shared-memory " + what() + " met a send of " + std::to_string(ch->message_bytes[half]) +
                               " bytes");
    const int64_t len = std::min(P, M - off);
    std::memcpy(data + off, layout_.channel_buffer(segment_.data(), src, rank_, half), len);
    ch->acked.publish(g);
    off += len;
  } while (off < M);
}

}  // namespace dtrain::shm
