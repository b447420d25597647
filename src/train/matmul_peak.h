// The FLOP rate one rank's matmuls actually reach here, which MFU is reported against. A datasheet
// peak means little on a shared CPU; a measured one is honest if it is a true upper bound: the GEMM
// is shaped like the model's largest one (tokens of a micro-batch × d_model × d_ff), runs at the
// rank's own thread count, and the rate is the best of several windows, since a window in which
// another process held a core says nothing about the kernels. Takes about `seconds`.
#pragma once
#include <ATen/ATen.h>

namespace dtrain {

// The best rate of an [m × k] · [k × n] fp32 matmul on `device`.
double measure_matmul_flops(const at::Device& device, int64_t m, int64_t k, int64_t n, double seconds = 0.5);

}  // namespace dtrain
