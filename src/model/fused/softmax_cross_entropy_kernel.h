// The row loops of the fused softmax cross-entropy (softmax_cross_entropy.h), over raw rows of
// logits in fp32, bf16 or fp16.
#pragma once
#include <c10/core/ScalarType.h>

#include <cstdint>

namespace dtrain::fused {

struct CrossEntropyRows {
  int64_t rows = 0, vocab = 0;
  c10::ScalarType type = c10::kFloat;  // the logits' (and their gradient's) type
  const void* logits = nullptr;        // [rows, vocab]
  const int64_t* targets = nullptr;    // [rows]: a column, or ignore_index
  int64_t ignore_index = -100;
  float* lse = nullptr;                // [rows]: written forward, read backward
};

// Writes each row's log-sum-exp and returns the sum over the rows not ignored of lse − logit[target].
double cross_entropy_forward(const CrossEntropyRows& rows);
// grad [rows, vocab] in the logits' type: (softmax − onehot(target))·scale, zero on ignored rows.
void cross_entropy_backward(const CrossEntropyRows& rows, float scale, void* grad);

// e^x in fp32 as the loops compute it: 2^k by the exponent bits times a degree-6 polynomial on
// [−ln2/2, ln2/2] (Cephes' expf), relative error below 3e-7; x is clamped at −87.3 (e^x at fp32's
// smallest normal), so that a softmax term below that is 1.2e-38 rather than 0. For tests.
float exp_approx(float x);

}  // namespace dtrain::fused
