// The matmul peak MFU is reported against: measured in the type the run multiplies in, and raised,
// with one warning, only when a step beats it by more than rounding.
#include <gtest/gtest.h>

#include "model/mixed_precision.h"
#include "train/matmul_peak.h"

using namespace dtrain;

// The bench model's largest layer (d 384 → 1536) over a micro-batch of 8 × 256 tokens. Where the
// CPU multiplies bf16 natively its units do about twice the fp32 work per cycle (2.4-2.7x measured
// on AVX512-BF16), so a probe whose bf16 figure came out below its fp32 one would be measuring a
// busy moment or the wrong kernel; a margin that wide needs no timing threshold of its own.
TEST(MatmulPeak, TheBf16ProbeIsAtLeastTheFp32OneWhereTheCpuHasBf16Units) {
  if (!MixedPrecision::make(at::kBFloat16, at::kCPU).native_gemm) GTEST_SKIP() << "this CPU has no native bf16 GEMM (AVX512-BF16 or AMX)";
  const double fp32 = measure_matmul_flops(at::kCPU, 2048, 384, 1536, 0.6, at::kFloat);
  const double bf16 = measure_matmul_flops(at::kCPU, 2048, 384, 1536, 0.6, at::kBFloat16);
  EXPECT_GE(bf16, fp32) << "bf16 " << bf16 / 1e9 << " GFLOP/s, fp32 " << fp32 / 1e9 << " GFLOP/s";
}

TEST(MfuPeak, WarnsOnceWhenAStepBeatsThePeakByMoreThanRounding) {
  MfuPeak peak(200e9);
  EXPECT_FALSE(peak.observe(150e9));
  EXPECT_EQ(peak.flops(), 200e9);
  // Within 1%: the peak follows, silently (its printed value would round to the same digits).
  EXPECT_FALSE(peak.observe(201e9));
  EXPECT_EQ(peak.flops(), 201e9);
  const auto warning = peak.observe(257.7e9);
  ASSERT_TRUE(warning);
  EXPECT_NE(warning->find("the model reached 257.7 GFLOP/s, above the matmul peak of 201.0 GFLOP/s"), std::string::npos) << *warning;
  EXPECT_EQ(peak.flops(), 257.7e9);
  // Never a second time, whatever comes next.
  EXPECT_FALSE(peak.observe(257.7e9));
  EXPECT_FALSE(peak.observe(400e9));
  EXPECT_EQ(peak.flops(), 400e9);
}
