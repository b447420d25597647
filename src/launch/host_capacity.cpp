#include "launch/host_capacity.h"

#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/byte_words.h"

namespace dtrain {
namespace {

int64_t mem_available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %lld kB", &kib) == 1) return int64_t(kib) * 1024;
  }
  return -1;
}

// Each reason on a line of its own, indented under the first.
std::string indent_lines(const std::string& text) {
  std::string out;
  for (char ch : text) out += ch == '\n' ? std::string("\n  ") : std::string(1, ch);
  return out;
}

std::string plural(int64_t n, const std::string& word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

}  // namespace

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? int(online) : 1;
}

int rank_threads(int configured, int local_ranks) {
  if (configured > 0) return configured;
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp && std::atoi(omp) > 0) return std::atoi(omp);
  return std::max(1, usable_cores() / std::max(1, local_ranks));
}

HostResources HostResources::of_this_host() { return {usable_cores(), mem_available_bytes()}; }

std::string check_threads_per_rank(int threads, const std::string& from, const HostResources& host) {
  if (threads <= host.cores) return "";
  return from + "=" + std::to_string(threads) + " is more threads per rank than the " + plural(host.cores, "usable core") +
         " of this host, where the threads beyond them only wait for each other; use " + from + "=" +
         std::to_string(host.cores) + " or fewer";
}

int worker_omp_threads() {
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const int threads = omp ? std::atoi(omp) : 0;
  return threads > 0 ? threads : 1;
}

bool admit_on_this_host(const std::string& command, const RanksOnHost& job) {
  const CapacityVerdict verdict = check_host_capacity(job, HostResources::of_this_host());
  if (!verdict.error.empty()) {
    std::cerr << command << ": error: this host cannot run the job as asked:\n  " << indent_lines(verdict.error) << std::endl;
    return false;
  }
  std::istringstream warnings(verdict.warning);
  for (std::string line; std::getline(warnings, line);) std::cerr << command << ": warning: " << line << std::endl;
  return true;
}

CapacityVerdict check_host_capacity(const RanksOnHost& job, const HostResources& host) {
  CapacityVerdict verdict;
  auto refuse = [&](const std::string& why) { verdict.error += (verdict.error.empty() ? "" : "\n") + why; };
  const std::string cores = plural(host.cores, "usable core");
  const int64_t most_ranks = int64_t(kMaxRanksPerCore) * host.cores;
  if (job.ranks > most_ranks)
    refuse("--nproc-per-node " + std::to_string(job.ranks) + " is more ranks than this host can run: it has " + cores +
           " (its CPU affinity) and dtrain starts at most " + std::to_string(kMaxRanksPerCore) +
           " ranks per core; use --nproc-per-node " + std::to_string(most_ranks) +
           " or fewer here, and more nodes (--nnodes) for a larger world");
  if (const std::string threads = check_threads_per_rank(job.threads_per_rank, job.threads_from, host); !threads.empty())
    refuse(threads);
  if (job.bytes_per_rank > 0 && host.available_bytes >= 0 && job.bytes_per_rank * job.ranks > double(host.available_bytes)) {
    const int64_t fit = int64_t(double(host.available_bytes) / job.bytes_per_rank);
    refuse(plural(job.ranks, "rank") + (job.ranks == 1 ? " needs" : " need") + " at least " +
           byte_words(job.bytes_per_rank * job.ranks) + " of memory (" + byte_words(job.bytes_per_rank) +
           " each: " + job.bytes_per_rank_how + "), but this host has " +
           byte_words(host.available_bytes) + " available (MemAvailable); " +
           (fit > 0 ? "use --nproc-per-node " + std::to_string(fit) + " or fewer here, more nodes (--nnodes), or a smaller model"
                    : "not even one rank fits: use a smaller model, or ZeRO (zero_optimization.stage) over more nodes"));
  }
  if (!verdict.error.empty()) return verdict;
  auto warn = [&](const std::string& why) { verdict.warning += (verdict.warning.empty() ? "" : "\n") + why; };
  const int64_t threads = int64_t(job.ranks) * job.threads_per_rank;
  if (threads > host.cores)
    warn(plural(job.ranks, "rank") + " × " + plural(job.threads_per_rank, "thread") + " = " + plural(threads, "thread") + " on " + cores +
         ": they take turns on the cores and every step waits for the slowest rank");
  const double estimated = job.estimated_peak_per_rank * job.ranks;
  if (job.estimated_peak_per_rank > 0 && host.available_bytes >= 0 && estimated > double(host.available_bytes)) {
    const int64_t fit = int64_t(double(host.available_bytes) / job.estimated_peak_per_rank);
    warn("the memory estimate puts each rank's peak at " + byte_words(job.estimated_peak_per_rank) +
         " (`dtrain estimate` shows every term): " + plural(job.ranks, "rank") + (job.ranks == 1 ? " needs" : " need") + " about " +
         byte_words(estimated) + ", more than the " + byte_words(host.available_bytes) +
         " this host has available (MemAvailable), so the run may be killed for memory" +
         (fit > 0 ? "; --nproc-per-node " + std::to_string(fit) + " or fewer fits" : ""));
  }
  return verdict;
}

}  // namespace dtrain
