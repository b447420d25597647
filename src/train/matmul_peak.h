// The FLOP rate one rank's matmuls actually reach here, which MFU is reported against. A datasheet
// peak means little on a shared CPU; a measured one is honest if it is a true upper bound: the GEMMs
// are shaped like the model's largest layer (tokens of a micro-batch M, d_model D, d_ff F) in its
// three forms — forward M×D·D×F, input gradient M×F·F×D, weight gradient F×M·M×D, whose long inner
// dimension runs fastest — through the kernels the layer calls (model/linear_gemm.h), at the rank's
// own thread count, and the rate is the best of several windows, since a window in which another
// process held a core says nothing about the kernels.
// Takes about `seconds`.
#pragma once
#include <ATen/ATen.h>

namespace dtrain {

// The best rate of the three GEMMs of a tokens × d_model → d_ff layer on `device`, with operands
// and result in `dtype`.
double measure_matmul_flops(const at::Device& device, int64_t tokens, int64_t d_model, int64_t d_ff, double seconds = 0.9,
                            at::ScalarType dtype = at::kFloat);

}  // namespace dtrain
