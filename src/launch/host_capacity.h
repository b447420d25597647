// Whether one host can run what a job asks of it, checked before the launcher starts any process:
// thousands of ranks on two cores, or a model whose ranks need more memory than the host has, would
// otherwise start process after process until the machine gives way.
#pragma once
#include <cstdint>
#include <string>

namespace dtrain {

// The most ranks the launcher starts per usable core. Beyond a few per core, ranks only take turns
// (every collective waits for the slowest), and each costs a process of memory; 8 leaves room for
// tests and small experiments that run many ranks on a small machine.
constexpr int kMaxRanksPerCore = 8;

// The cores this process may run on: its CPU affinity, as `nproc` counts them.
int usable_cores();

struct HostResources {
  int cores = 1;                 // usable_cores()
  int64_t available_bytes = -1;  // MemAvailable from /proc/meminfo; -1 when unknown
  static HostResources of_this_host();
};

// What a job starts on one host.
struct RanksOnHost {
  int ranks = 1;                      // --nproc-per-node
  int threads_per_rank = 1;           // intra-op threads of each rank
  std::string threads_from = "OMP_NUM_THREADS";  // the setting that gave them, as the fix names it
  double bytes_per_rank = 0;          // the least memory each rank needs; 0 when unknown
  std::string bytes_per_rank_how;     // how that was estimated, for the message
  double estimated_peak_per_rank = 0;  // the memory estimate's peak of the most loaded rank; 0 when none
};

struct CapacityVerdict {
  std::string error;    // what cannot run, with the numbers and the fix; empty when it can
  std::string warning;  // it runs, but slower than it could be or at risk: one line per reason
};

// Refuses more than kMaxRanksPerCore ranks per core, more threads per rank than cores, and ranks that
// together need more memory than is available; warns when ranks × threads exceed the cores, and when
// the ranks' estimated peaks together exceed the available memory (the floor is what refuses: the
// estimate is close, not a bound, so a run it puts just over may still fit).
CapacityVerdict check_host_capacity(const RanksOnHost& job, const HostResources& host);

// The threads part alone, for a rank that checks its own setting: empty when `threads` fit the cores.
std::string check_threads_per_rank(int threads, const std::string& from, const HostResources& host);

// `command` ("dtrain launch") checks `job` against this host: prints the refusal and returns false, or
// prints the warning, if any, once, and returns true.
bool admit_on_this_host(const std::string& command, const RanksOnHost& job);

// The intra-op threads of one of `local_ranks` ranks on this host: `configured` (train.threads) when
// positive, else OMP_NUM_THREADS when set, else its share of the usable cores.
int rank_threads(int configured, int local_ranks);

// OMP_NUM_THREADS as the launcher hands it to each worker: the environment's when set, else 1.
int worker_omp_threads();

}  // namespace dtrain
