// A counter in shared memory that one rank advances and others wait on: the only synchronisation
// the shared-memory backend uses. Waiting spins briefly (a collective's peers usually arrive within
// microseconds) and then sleeps in the kernel on the counter's futex, so a rank that waits long
// gives its core back to the compute threads. A publisher makes the futex call only when someone
// sleeps. The counter lives in its own cache line so that ranks advancing neighbouring flags do not
// invalidate each other's lines.
#pragma once
#include <c10/util/FunctionRef.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace dtrain::shm {

struct alignas(64) SequenceFlag {
  std::atomic<uint32_t> value{0};
  std::atomic<uint32_t> sleepers{0};

  // Makes `v` visible, with every write this rank made before it.
  void publish(uint32_t v);
  // True once value has reached `target` (modulo 2^32: sequences wrap), with every write its
  // publisher made before. Never blocks.
  bool reached(uint32_t target) const;
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words must be lock-free");

// Waits until `flag` reaches `target`. Every `check_every` of sleeping it calls `check`, which throws
// to give up (a deadline passed, the publisher died); a check also runs once before the first sleep.
// `yield`: while spinning, hand the core every few microseconds to whatever else may run on it. That
// lets a peer run when there are more ranks than cores; with a core per rank it would only hand the
// core to this rank's compute thread, and this waiter would not get it back before the next tick.
void wait_for(const SequenceFlag& flag, uint32_t target, c10::function_ref<void()> check, bool yield,
              std::chrono::milliseconds check_every = std::chrono::milliseconds(100));

}  // namespace dtrain::shm
