#include "train/compute_threads.h"

#include <ATen/Parallel.h>
#include <unistd.h>

#include <cstdlib>

namespace dtrain {

void use_compute_threads(int threads) {
  at::set_num_threads(threads);
}

void ensure_passive_openmp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY")) return;
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  ::execv("/proc/self/exe", argv);  // returns only if exec failed: go on with the default policy
}

}  // namespace dtrain
