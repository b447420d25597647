// How many threads one rank computes with. ATen's intra-op pool and OpenBLAS's own pthread pool are
// separate: OpenBLAS reads its count once from the environment when it loads (the launcher's
// OMP_NUM_THREADS=1) and ignores at::set_num_threads, so both are set here.
#pragma once

namespace dtrain {

void use_compute_threads(int threads);

}  // namespace dtrain
