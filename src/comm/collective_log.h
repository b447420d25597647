// Each rank's always-on record of its recent collectives, per group: what a hang diagnosis compares
// across ranks. Recording is a mutex and a ring-buffer slot — no communication — so it stays on in
// production, where hangs happen.
#pragma once
#include <c10/core/ScalarType.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dtrain {

class ChromeTrace;

enum class OpState { Entered, Completed, Failed };

struct CollectiveRecord {
  int64_t seq = 0;          // per-group sequence number of collectives (point-to-point ops use 0)
  std::string op;           // "all_reduce", "broadcast", "send->1", ...
  std::vector<int64_t> shape;
  std::string dtype;
  std::string label;        // the caller's tag, e.g. "ddp bucket 3"
  OpState state = OpState::Entered;

  // "all_reduce #118 [1000] float32 'ddp bucket 3'"
  std::string describe() const;
};

class CollectiveLog {
 public:
  explicit CollectiveLog(size_t capacity = 64) : capacity_(capacity) {}

  // Registers a group so its (possibly empty) history is reported.
  void add_group(const std::string& key, const std::string& name, const std::vector<int>& ranks);
  void record(const std::string& group_key, const CollectiveRecord& r);
  void set_state(const std::string& group_key, int64_t seq, const std::string& op, OpState state);

  // {"<group key>": {"name":..., "ranks":[...], "entries":[...oldest first...]}}
  nlohmann::json to_json() const;

  // Where the rank's ops also go as timeline slices (train.trace; comm/chrome_trace.h), or null.
  void set_trace(std::shared_ptr<ChromeTrace> trace);
  std::shared_ptr<ChromeTrace> trace() const;

 private:
  struct History {
    std::string name;
    std::vector<int> ranks;
    std::deque<CollectiveRecord> entries;  // oldest first, at most capacity_
  };
  size_t capacity_;
  mutable std::mutex mutex_;  // recording threads (main, DDP hooks) vs the diagnosis responder
  std::map<std::string, History> groups_;
  std::shared_ptr<ChromeTrace> trace_;
};

CollectiveRecord record_from_json(const nlohmann::json& j);

// PyTorch's Python names ("float32"), which users know, rather than c10's ("Float").
std::string dtype_name(c10::ScalarType t);

}  // namespace dtrain
