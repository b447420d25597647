#include "train/compute_threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

namespace dtrain {

void use_compute_threads(int threads) {
  at::set_num_threads(threads);
  // Looked up at run time: present when the BLAS behind LibTorch is OpenBLAS, absent otherwise.
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(threads);
}

}  // namespace dtrain
