// The sum of squares of contiguous fp32 CPU memory in fp64, in one read pass: ATen's way (a run
// widened to an fp64 copy, squared into a second, then summed) writes and reads back four times the
// bytes it reads. Each square of an fp32 value is exact in fp64; the sums are added in an order fixed
// by the elements' positions alone (lanes of 16 within blocks of 2^16, the lanes and then the blocks
// in order), so the result does not depend on the thread count, on the ISA the CPU picked, or on the
// compiler's vector width: replicas that compute the norm of equal gradients get equal bits.
#pragma once
#include <cstdint>

namespace dtrain {

double fused_sum_of_squares(const float* g, int64_t n);

}  // namespace dtrain
