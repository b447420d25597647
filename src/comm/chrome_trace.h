// One rank's timeline for a Chrome/Perfetto trace (train.trace): complete events ("ph": "X"), each
// a named slice of steady_clock time with a category and arguments. The executors record their
// actions in it (cat "compute": "F", "B", "I", "W" with {"mb", "chunk"}), and every collective and
// point-to-point op of collectives.cpp records itself when a CollectiveLog carries a trace (cat
// "comm", named by the op, e.g. "all_reduce" or "send->1", with its label, group, and the shape and
// dtype of the tensor it sends, as the rank's CollectiveLog records them). An op's slice
// runs from the call that starts it to the return of the wait() that sees it done: for an async op
// that is what the rank observed, so a wait issued late lengthens it, and its args say how much of
// it the caller spent blocked (blocked_us). An async op nobody waits for records nothing.
//
// Events are kept in memory (about 200 bytes each) until the run ends and train/run_trace.h merges
// every rank's into one trace.json; past kMaxEvents further ones are counted, not kept. They are kept
// as text in two buffers reserved up front, not as strings and JSON objects of their own: those are
// small blocks that live to the end of the run, and glibc's malloc would carve them out of the large
// blocks a step frees (activations, messages of up to 32 MiB come from the same heap under
// train/host_memory.h), so that the next step's blocks no longer fit the holes and the heap grows:
// by 20-25 MiB a step on ring attention's 48 traced ops a step.
#pragma once
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace dtrain {

class ChromeTrace {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxEvents = size_t(1) << 21;
  // What the buffers hold before they first grow: a few thousand events, about 1.5 MiB.
  static constexpr size_t kReservedEvents = size_t(1) << 13, kReservedText = size_t(1) << 20;

  ChromeTrace();

  // Thread-safe: collectives may be started from autograd's hooks.
  void record(std::string name, std::string category, Clock::time_point begin, Clock::time_point end, nlohmann::json args = {});

  // This rank's events: {"name", "cat", "ph": "X", "ts", "dur", "args"}, ts in microseconds of
  // steady_clock since its epoch (train/run_trace.h moves them onto a common origin), oldest first.
  nlohmann::json events() const;
  size_t dropped() const;

 private:
  // Where an event's name, category and serialised args lie in text_.
  struct Event {
    Clock::time_point begin, end;
    size_t text_at = 0;
    uint32_t name_len = 0, category_len = 0, args_len = 0;
  };
  mutable std::mutex mutex_;
  std::vector<Event> events_;
  std::string text_;
  size_t dropped_ = 0;
};

// Records [construction, destruction) as one slice; nothing when `trace` is null, so a caller holds
// one whether or not the run is traced.
class TraceSlice {
 public:
  TraceSlice(ChromeTrace* trace, std::string name, std::string category, nlohmann::json args = {})
      : trace_(trace), name_(std::move(name)), category_(std::move(category)), args_(std::move(args)),
        begin_(trace ? ChromeTrace::Clock::now() : ChromeTrace::Clock::time_point()) {}
  ~TraceSlice() {
    if (trace_) trace_->record(std::move(name_), std::move(category_), begin_, ChromeTrace::Clock::now(), std::move(args_));
  }
  TraceSlice(const TraceSlice&) = delete;
  TraceSlice& operator=(const TraceSlice&) = delete;

 private:
  ChromeTrace* trace_;
  std::string name_, category_;
  nlohmann::json args_;
  ChromeTrace::Clock::time_point begin_;
};

// Chrome's trace format for slices that overlap without nesting (async collectives in flight
// together) needs them on different threads: each event gets the lowest lane, from 0, whose previous
// slice has ended by its start. `events` are ChromeTrace::events() of one category; returns each
// one's lane, in their order.
std::vector<int> assign_lanes(const nlohmann::json& events);

}  // namespace dtrain
