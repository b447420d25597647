// The reference the context-attention tests compare against: attention written out as its formula,
// in fp64, with autograd for the gradients: softmax(q k^T / sqrt(hd), masked) v, kv head h / (H/KV)
// serving query head h. Independent of the fused kernels under test.
#pragma once
#include <ATen/ATen.h>

#include <cmath>
#include <string>

namespace dtrain::test {

struct AttentionReference {
  at::Tensor out, dq, dk, dv;  // fp64
};

inline AttentionReference reference_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& dout,
                                              bool causal) {
  at::Tensor q64 = q.to(at::kDouble).requires_grad_(), k64 = k.to(at::kDouble).requires_grad_(),
             v64 = v.to(at::kDouble).requires_grad_();
  const int64_t group = q.size(1) / k.size(1), tq = q.size(2), tk = k.size(2);
  at::Tensor scores = at::matmul(q64, k64.repeat_interleave(group, 1).transpose(-1, -2)) / std::sqrt(double(q.size(3)));
  if (causal) scores = scores.masked_fill(at::ones({tq, tk}, at::kBool).triu(1), -INFINITY);
  const at::Tensor out = at::matmul(at::softmax(scores, -1), v64.repeat_interleave(group, 1));
  out.backward(dout.to(at::kDouble));
  return {out.detach(), q64.grad(), k64.grad(), v64.grad()};
}

// Per element |got - want| <= atol + rtol * |want|; "" when every element is within, else the worst.
inline std::string close_or_worst(const at::Tensor& got, const at::Tensor& want, double atol, double rtol) {
  if (!got.sizes().equals(want.sizes())) return "shape " + c10::str(got.sizes()) + ", want " + c10::str(want.sizes());
  const at::Tensor g = got.to(at::kDouble), w = want.to(at::kDouble);
  const at::Tensor excess = (g - w).abs() - (atol + rtol * w.abs());
  if (excess.max().item<double>() <= 0) return "";
  const int64_t worst = excess.flatten().argmax().item<int64_t>();
  return "element " + std::to_string(worst) + " is " + std::to_string(g.flatten()[worst].item<double>()) + ", want " +
         std::to_string(w.flatten()[worst].item<double>()) + " (atol " + std::to_string(atol) + ", rtol " + std::to_string(rtol) + ")";
}

}  // namespace dtrain::test
