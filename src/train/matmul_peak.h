// The FLOP rate one rank's matmuls actually reach here (a square fp32 matmul, timed), which MFU is
// reported against. A datasheet peak means little on a shared CPU; a measured one is honest. Takes
// about `seconds`.
#pragma once
#include <ATen/ATen.h>

namespace dtrain {

double measure_matmul_flops(const at::Device& device, double seconds = 0.3);

}  // namespace dtrain
