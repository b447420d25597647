// How many threads one rank computes with, and how idle threads wait.
#pragma once

namespace dtrain {

// LibTorch's wheel runs ATen, MKL and oneDNN on one OpenMP pool (GNU OpenMP, MKL linked with its
// GNU threading layer), and at::set_num_threads sizes all three: one pool, no oversubscription.
void use_compute_threads(int threads);

// OpenMP's default is to spin after every parallel region, and OpenBLAS's threads spin too; with no
// spare core the two pools steal each other's cores (a step measured 1.8x slower with 2 threads).
// The OpenMP runtime reads OMP_WAIT_POLICY once, before main, so when it is unset this sets it to
// PASSIVE and re-executes the program with the same arguments. An explicit setting is respected.
void ensure_passive_openmp_wait(char** argv);

}  // namespace dtrain
