#include "parallel/context/attention_block.h"

#include <stdexcept>
#include <string>

#include "model/fused/flash_attention.h"

namespace dtrain {
namespace {

// The CUDA efficient-attention kernel pads its log-sum-exp rows to a multiple of this.
constexpr int64_t kEfficientLseAlign = 32;

int64_t group_size(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4)
    throw std::invalid_argument("block attention needs [B, heads, T, head_dim] tensors, got q " + c10::str(q.sizes()) + ", k " +
                                c10::str(k.sizes()) + ", v " + c10::str(v.sizes()));
  if (k.size(1) != v.size(1) || k.size(1) == 0 || q.size(1) % k.size(1) != 0)
    throw std::invalid_argument("block attention: k and v have " + std::to_string(k.size(1)) + " and " +
                                std::to_string(v.size(1)) + " heads, which must be equal and divide q's " +
                                std::to_string(q.size(1)));
  return q.size(1) / k.size(1);
}

[[noreturn]] void no_kernel_for(const at::Tensor& q) {
  throw std::invalid_argument("block attention has no fused kernel for device " + q.device().str() +
                              " (it runs on cpu and cuda)");
}

// The efficient kernel wants as many kv heads as query heads: kv heads are repeated on the device
// where they arrived (only the KV heads travel), and their gradients summed back over the group.
at::Tensor repeated_heads(const at::Tensor& kv, int64_t group) { return group == 1 ? kv : kv.repeat_interleave(group, 1); }

at::Tensor summed_over_group(const at::Tensor& grad, int64_t group) {
  if (group == 1) return grad;
  const auto s = grad.sizes();
  return grad.view({s[0], s[1] / group, group, s[2], s[3]}).sum(2);
}

}  // namespace

BlockAttention block_attention_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal) {
  const int64_t group = group_size(q, k, v);
  switch (q.device().type()) {
    case at::kCPU: {
      // 16-bit blocks reach here only where the GEMMs are native (mixed precision widens them to fp32
      // otherwise): dtrain's kernel, all of whose products are 16-bit GEMMs (flash_attention.h).
      if (flash_attention_serves(q, k, v)) {
        auto [out, lse] = flash_attention_forward(q, k, v, causal);
        return {out, lse};
      }
      // ATen's CPU flash kernel maps query head h to kv head h / group itself (checked against the math
      // path in the context-attention tests), so k and v go in unexpanded.
      auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal);
      return {out, lse};
    }
    case at::kCUDA: {
      auto result = at::_scaled_dot_product_efficient_attention(q, repeated_heads(k, group), repeated_heads(v, group),
                                                                std::nullopt, /*compute_log_sumexp=*/true, 0.0, causal);
      return {std::get<0>(result), std::get<1>(result).narrow(2, 0, q.size(2))};
    }
    default:
      no_kernel_for(q);
  }
}

BlockGradients block_attention_backward(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const at::Tensor& out, const at::Tensor& lse, bool causal) {
  const int64_t group = group_size(q, k, v);
  switch (q.device().type()) {
    case at::kCPU: {
      if (flash_attention_serves(q, k, v)) {
        auto [dq, dk, dv] = flash_attention_backward(dout, q, k, v, out, lse, causal);
        return {dq, dk, dv};
      }
      auto [dq, dk, dv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(dout, q, k, v, out, lse, 0.0, causal);
      return {dq, dk, dv};
    }
    case at::kCUDA: {
      // The kernel reads lse in the padded shape its forward returns; the padding rows are never used.
      const int64_t rows = q.size(2), padded = (rows + kEfficientLseAlign - 1) / kEfficientLseAlign * kEfficientLseAlign;
      const at::Tensor padded_lse = at::constant_pad_nd(lse, {0, padded - rows}, 0).contiguous();
      const at::Tensor no_rng = at::zeros({}, at::kLong);  // dropout 0 reads no philox state
      // In 16 bits (sm80 and later) the kernel computes rowsum(dout·out) itself and reads out as its
      // forward writes it, [B, T, heads, head_dim] contiguous, whatever its strides say; a block of
      // the ring's [B, heads, T, head_dim] output read so gave garbage gradients on an H200.
      const at::Tensor out_as_written = out.transpose(1, 2).contiguous().transpose(1, 2);
      auto [dq, dk, dv, dbias] = at::_scaled_dot_product_efficient_attention_backward(
          dout, q, repeated_heads(k, group), repeated_heads(v, group), at::Tensor(), out_as_written, padded_lse, no_rng, no_rng, 0.0,
          {true, true, true, false}, causal);
      return {dq, summed_over_group(dk, group), summed_over_group(dv, group)};
    }
    default:
      no_kernel_for(q);
  }
}

}  // namespace dtrain
