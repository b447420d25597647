#include "model/fused/flash_softmax.h"

#include <cstring>
#include <limits>

#include "model/fused/float_convert.h"

namespace dtrain::flash {
namespace {

// Enough lanes for a zmm register: partial sums and maxima kept per lane vectorise without
// reassociating a single accumulator (which GCC does not do without -ffast-math).
constexpr int kLanes = 16;

// Adding and subtracting 1.5·2^23 rounds a float of magnitude below 2^22 to an integer (to nearest,
// ties to even) in plain arithmetic, which vectorises on every ISA (floor needs SSE4.1).
constexpr float kRoundingShift = 12582912.f;

// 2^t for t <= 127: 2^n·2^f with n = round(t), f in [-1/2, 1/2], 2^f = e^u (u = f·ln 2) by its Taylor
// polynomial to u^6 (truncation error (ln2/2)^7/7! ≈ 1.2e-7 relative). The exponent goes straight into
// the float's bits; t < -126.5 (n <= -127) gives exponent bits 0, i.e. 0.
inline __attribute__((always_inline)) float exp2_of(float t) {
  t = t < -127.f ? -127.f : (t > 127.f ? 127.f : t);
  const float n = (t + kRoundingShift) - kRoundingShift;
  const float u = (t - n) * 0.693147180559945f;
  const float p =
      1.f + u * (1.f + u * (0.5f + u * (1.f / 6 + u * (1.f / 24 + u * (1.f / 120 + u * (1.f / 720))))));
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return n <= -127.f ? 0.f : p * scale;
}

}  // namespace

__attribute__((target_clones("avx512f", "avx2", "default"))) float exp_and_sum(float* x, int64_t n, float scale, float shift) {
  constexpr float kLog2e = 1.4426950408889634f;
  const float a = scale * kLog2e, b = shift * kLog2e;
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      x[i + l] = exp2_of(x[i + l] * a - b);
      lanes[l] += x[i + l];
    }
  float sum = 0;
  for (; i < n; ++i) {
    x[i] = exp2_of(x[i] * a - b);
    sum += x[i];
  }
  for (float s : lanes) sum += s;
  return sum;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) float row_max(const float* x, int64_t n) {
  float lanes[kLanes];
  for (float& l : lanes) l = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] = x[i + l] > lanes[l] ? x[i + l] : lanes[l];
  float m = -std::numeric_limits<float>::infinity();
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (float l : lanes) m = l > m ? l : m;
  return m;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void softmax_gradient(float* ds, const float* p, const float* dp,
                                                                                   int64_t n, float d, float scale) {
  for (int64_t i = 0; i < n; ++i) ds[i] = p[i] * (dp[i] - d) * scale;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void round_to_bfloat16(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = fused::narrow<fused::Bf16Bits>(x[i]);
}

}  // namespace dtrain::flash
