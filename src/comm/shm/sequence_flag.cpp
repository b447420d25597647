#include "comm/shm/sequence_flag.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

namespace dtrain::shm {
namespace {

// Shared (not FUTEX_PRIVATE) operations: the word is mapped by several processes.
void futex_wait(const std::atomic<uint32_t>& word, uint32_t expected, std::chrono::milliseconds limit) {
  timespec ts{static_cast<time_t>(limit.count() / 1000), static_cast<long>(limit.count() % 1000) * 1000000};
  syscall(SYS_futex, reinterpret_cast<const uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long a waiter spins before it sleeps: long enough to catch a peer that is a memcpy behind,
// short enough that two waiting ranks on two cores hand their cores back quickly.
constexpr auto kSpin = std::chrono::microseconds(50);

}  // namespace

void SequenceFlag::publish(uint32_t v) {
  // seq_cst on both sides (here and in wait_for) orders the store before the sleepers load, and the
  // waiter's sleepers increment before its value re-check: one of the two always sees the other.
  value.store(v, std::memory_order_seq_cst);
  if (sleepers.load(std::memory_order_seq_cst) != 0) futex_wake_all(value);
}

bool SequenceFlag::reached(uint32_t target) const {
  return static_cast<int32_t>(value.load(std::memory_order_acquire) - target) >= 0;
}

void wait_for(const SequenceFlag& flag, uint32_t target, c10::function_ref<void()> check, bool yield,
              std::chrono::milliseconds check_every) {
  if (flag.reached(target)) return;
  const auto spin_end = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (flag.reached(target)) return;
    cpu_relax();
    if ((i & 63) == 63) {
      if (std::chrono::steady_clock::now() > spin_end) break;
      if (yield) sched_yield();
    }
  }
  auto& f = const_cast<SequenceFlag&>(flag);
  for (;;) {
    check();
    f.sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = f.value.load(std::memory_order_seq_cst);
    if (static_cast<int32_t>(seen - target) < 0) futex_wait(f.value, seen, check_every);
    f.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (flag.reached(target)) return;
  }
}

}  // namespace dtrain::shm
