// How a group's shared-memory segment is laid out. Each member owns a slot: a header with its
// flags and the descriptors of its recent collectives, and a double buffer that its chunks pass
// through (one half is being read by the peers while the other is filled). Each ordered pair of
// members has a channel for point-to-point messages, double-buffered the same way.
//
//   [SegmentHeader][SlotHeader x n][ChannelHeader x n*n][slot buffers: n x 2 x chunk][channel buffers: n*n x 2 x channel]
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "comm/shm/sequence_flag.h"

namespace dtrain::shm {

// What a member says it is doing in its collective number `op_seq`; the peers compare it with
// their own before touching any data, so a mismatch is an error instead of garbage.
struct OpDescriptor {
  uint32_t op_seq = 0;
  int32_t kind = 0;    // ShmOp
  int32_t dtype = 0;   // at::ScalarType
  int32_t reduce = 0;  // c10d::ReduceOp::RedOpType
  int64_t numel = 0;   // of the input
  int32_t root = 0;
};

// A member runs at most one step ahead of its slowest peer, so four descriptors (indexed by
// op_seq % 4) are never overwritten before every peer has read them.
constexpr int kDescriptorRing = 4;

struct alignas(64) SlotHeader {
  std::atomic<int32_t> pid{0};
  OpDescriptor ops[kDescriptorRing];
  SequenceFlag arrived;   // step k: this member's data for step k is in its buffer
  SequenceFlag reduced;   // step k: its part of step k's reduction is in its buffer (all-reduce)
  SequenceFlag released;  // step k: it has finished reading everyone's step-k buffers
};

struct alignas(64) ChannelHeader {
  SequenceFlag sent;   // chunks written by the sender
  SequenceFlag acked;  // chunks the receiver has copied out
  int64_t message_bytes[2] = {0, 0};  // size of the message each half's chunk belongs to
};

struct alignas(64) SegmentHeader {
  uint32_t magic = 0;
  int32_t size = 0;
  int64_t chunk_bytes = 0;
  int64_t channel_bytes = 0;
};

constexpr uint32_t kSegmentMagic = 0x64747368;  // "dtsh"

class GroupLayout {
 public:
  GroupLayout(int size, int64_t chunk_bytes, int64_t channel_bytes)
      : n_(size), chunk_(chunk_bytes), channel_(channel_bytes) {}

  size_t bytes() const { return channel_buffers_offset() + size_t(n_) * n_ * 2 * channel_; }

  SegmentHeader* header(char* base) const { return reinterpret_cast<SegmentHeader*>(base); }
  SlotHeader* slot(char* base, int r) const {
    return reinterpret_cast<SlotHeader*>(base + sizeof(SegmentHeader)) + r;
  }
  ChannelHeader* channel(char* base, int src, int dst) const {
    return reinterpret_cast<ChannelHeader*>(base + sizeof(SegmentHeader) + n_ * sizeof(SlotHeader)) + src * n_ + dst;
  }
  char* buffer(char* base, int r, int half) const { return base + slot_buffers_offset() + (size_t(r) * 2 + half) * chunk_; }
  char* channel_buffer(char* base, int src, int dst, int half) const {
    return base + channel_buffers_offset() + ((size_t(src) * n_ + dst) * 2 + half) * channel_;
  }
  int64_t chunk_bytes() const { return chunk_; }
  int64_t channel_bytes() const { return channel_; }

 private:
  size_t slot_buffers_offset() const {
    const size_t headers = sizeof(SegmentHeader) + n_ * sizeof(SlotHeader) + size_t(n_) * n_ * sizeof(ChannelHeader);
    return (headers + 4095) / 4096 * 4096;
  }
  size_t channel_buffers_offset() const { return slot_buffers_offset() + size_t(n_) * 2 * chunk_; }

  int n_;
  int64_t chunk_;
  int64_t channel_;
};

}  // namespace dtrain::shm
