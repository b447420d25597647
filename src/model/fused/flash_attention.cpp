#include "model/fused/flash_attention.h"

#include <torch/csrc/autograd/custom_function.h>

#include <exception>

#include "model/fused/flash_blocks.h"

namespace dtrain {
namespace {

// Whether the 16-bit block GEMM reads the VNNI layout on this CPU: ATen's brgemm runs oneDNN's
// micro-kernel only where the CPU has the instructions (AVX512-BF16 / -FP16 or AMX) and otherwise
// falls back to a GEMM that would read the packed B as a plain matrix. One exact product of small
// integers tells the two apart.
template <typename T>
bool vnni_gemm_works() {
  try {
    const T a[4] = {T(1), T(2), T(3), T(4)};  // [[1,2],[3,4]]
    const T b[4] = {T(5), T(6), T(7), T(8)};  // [[5,6],[7,8]]
    T packed[4];
    flash::pack_rows(b, 2, 2, 2, packed);
    float c[4] = {};
    flash::block_gemm<T>(2, 2, 2, a, 2, packed, c, 2, false);
    at::native::cpublas::brgemm_release();
    return c[0] == 19 && c[1] == 22 && c[2] == 43 && c[3] == 50;
  } catch (const std::exception&) {
    return false;
  }
}

bool native_for(at::ScalarType type) {
  static const bool bf16 = vnni_gemm_works<at::BFloat16>(), fp16 = vnni_gemm_works<at::Half>();
  return type == at::kBFloat16 ? bf16 : type == at::kHalf ? fp16 : false;
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct FlashAttentionFunction : public torch::autograd::Function<FlashAttentionFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal) {
    auto [out, lse] = flash_attention_forward(q, k, v, causal);
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["causal"] = causal;
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto s = ctx->get_saved_variables();
    auto [dq, dk, dv] = flash_attention_backward(grad_outputs[0], s[0], s[1], s[2], s[3], s[4], ctx->saved_data["causal"].toBool());
    return {dq, dk, dv, at::Tensor()};
  }
};

}  // namespace

bool flash_attention_serves(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const auto type = q.scalar_type();
  if (!q.device().is_cpu() || !k.device().is_cpu() || !v.device().is_cpu()) return false;
  if (k.scalar_type() != type || v.scalar_type() != type || q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return false;
  if (k.size(1) == 0 || q.size(1) % k.size(1) != 0 || k.sizes() != v.sizes() || q.size(0) != k.size(0) || q.size(3) != k.size(3))
    return false;
  if (q.size(3) % 2 != 0 || q.stride(3) != 1 || k.stride(3) != 1 || v.stride(3) != 1) return false;
  return native_for(type);
}

at::Tensor flash_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal) {
  return FlashAttentionFunction::apply(q, k, v, causal);
}

}  // namespace dtrain
