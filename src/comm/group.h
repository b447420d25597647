// A process group: a named set of global ranks with its own backend communicator, its own sequence
// of collectives (numbered from 1, identical on every member) and its own timeout. Groups are
// created by World/DeviceMesh and passed explicitly to whatever communicates; nothing is global.
#pragma once
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "comm/collective_log.h"
#include "comm/hang_diagnosis.h"

namespace dtrain {

class Group {
 public:
  Group(std::string name, std::vector<int> ranks, int global_rank, c10::intrusive_ptr<c10d::Backend> backend,
        std::chrono::milliseconds timeout, std::shared_ptr<CollectiveLog> log,
        std::shared_ptr<HangDiagnosis> diagnosis);

  const std::string& name() const { return name_; }
  // Unique among groups: the name plus the members ("dp:0,2").
  const std::string& key() const { return key_; }
  int rank() const { return rank_; }                     // rank within the group
  int size() const { return static_cast<int>(ranks_.size()); }
  const std::vector<int>& ranks() const { return ranks_; }  // global ranks, by group rank
  int global_rank() const { return ranks_[rank_]; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // "shm", "gloo", "nccl", "shm+gloo" (two levels across nodes), or "none" for a group of one.
  std::string backend_name() const { return backend_ ? backend_->getBackendName() : "none"; }

  // For the collective helpers (collectives.cpp): the backend, the next sequence number, and the
  // record/diagnosis pair.
  c10d::Backend& backend() { return *backend_; }
  int64_t next_seq() { return ++seq_; }
  CollectiveLog& log() { return *log_; }
  HangDiagnosis& diagnosis() { return *diagnosis_; }
  // Seconds callers have spent blocked in this group's collectives, starting them and waiting for
  // them: a synchronous one's whole time, an asynchronous one's exposed part. Another thread may add
  // while one reads.
  void add_waited(std::chrono::nanoseconds waited) { waited_ns_ += waited.count(); }
  double waited_s() const { return double(waited_ns_.load()) * 1e-9; }

 private:
  std::string name_;
  std::string key_;
  std::vector<int> ranks_;
  int rank_;
  c10::intrusive_ptr<c10d::Backend> backend_;  // null when size() == 1: nothing to talk to
  std::chrono::milliseconds timeout_;
  int64_t seq_ = 0;  // collectives issued so far; every member issues the same sequence
  std::shared_ptr<CollectiveLog> log_;
  std::shared_ptr<HangDiagnosis> diagnosis_;
  std::atomic<int64_t> waited_ns_{0};
};

}  // namespace dtrain
