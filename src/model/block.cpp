#include "model/block.h"

#include "model/activation_checkpoint.h"
#include "model/fused/bias_gelu.h"
#include "model/fused/flash_attention.h"

namespace dtrain {

namespace {

// Rotates each head's halves (the "rotate half" form of RoPE): x·cos + rotate(x)·sin.
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1);
}

// x + (product + the layer's bias), the bias read as the layer's forward reads it and its gradient
// rounded as the layer rounds its weight's.
ResidualAdd residual(const at::Tensor& x, const at::Tensor& product, const LinearImpl& layer) {
  const MixedPrecision& mp = layer.precision();
  return {x, product, layer.read_bias(), mp.round_gradients ? mp.compute : at::kFloat};
}

}  // namespace

BlockImpl::BlockImpl(const TransformerConfig& c) : head_dim_(c.head_dim()) {
  const int64_t d = c.d_model, f = c.ff_dim();
  // GPT-2 has biases everywhere and LayerNorm; Llama has no bias and RMSNorm.
  const bool bias = !c.is_llama();
  const auto norm = c.is_llama() ? NormImpl::Kind::RmsNorm : NormImpl::Kind::LayerNorm;
  ln1 = register_module("ln1", Norm(norm, d, c.norm_eps));
  q_proj = register_module("q_proj", Linear(d, c.n_head * head_dim_, bias));
  k_proj = register_module("k_proj", Linear(d, c.kv_heads() * head_dim_, bias));
  v_proj = register_module("v_proj", Linear(d, c.kv_heads() * head_dim_, bias));
  o_proj = register_module("o_proj", Linear(c.n_head * head_dim_, d, bias));
  ln2 = register_module("ln2", Norm(norm, d, c.norm_eps));
  if (c.is_llama()) gate_proj = register_module("gate_proj", Linear(d, f, bias));
  up_proj = register_module("up_proj", Linear(d, f, bias));
  down_proj = register_module("down_proj", Linear(f, d, bias));
}

void BlockImpl::set_precision(const MixedPrecision& mp) {
  mp_ = mp;
  for (auto& layer : matmul_layers()) layer->set_precision(mp);
}

std::vector<Linear> BlockImpl::matmul_layers() const {
  std::vector<Linear> layers{q_proj, k_proj, v_proj, o_proj};
  if (gate_proj) layers.push_back(gate_proj);
  layers.push_back(up_proj);
  layers.push_back(down_proj);
  return layers;
}

std::vector<at::Tensor> BlockImpl::project(const at::Tensor& x, const std::vector<LinearImpl*>& layers) {
  if (input_linears_) return input_linears_(x, layers);
  const at::Tensor in = mp_.matmul_input(x);
  std::vector<at::Tensor> out;
  for (LinearImpl* layer : layers) out.push_back(layer->forward(in));
  return out;
}

at::Tensor BlockImpl::attention(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  auto qkv = project(x, {q_proj.get(), k_proj.get(), v_proj.get()});
  // The heads this block computes, read from the projections rather than the config; the sequence
  // from them too, which may be longer than x's when x is a shard of it.
  const int64_t B = qkv[0].size(0), T = qkv[0].size(1), H = qkv[0].size(-1) / head_dim_, KV = qkv[1].size(-1) / head_dim_;
  auto q = qkv[0].view({B, T, H, head_dim_}).transpose(1, 2);   // [B, H, T, hd]
  auto k = qkv[1].view({B, T, KV, head_dim_}).transpose(1, 2);  // [B, KV, T, hd]
  auto v = qkv[2].view({B, T, KV, head_dim_}).transpose(1, 2);  // [B, KV, T, hd]
  if (cos.defined()) {  // in fp32, like the tables
    const at::Tensor c = cos.narrow(0, 0, T), s = sin.narrow(0, 0, T);
    q = apply_rope(q.to(at::kFloat), c, s);
    k = apply_rope(k.to(at::kFloat), c, s);
  }
  // A flash-attention kernel: it skips the blocks the causal mask hides, never materialises the T×T
  // scores, and serves grouped-query heads (KV < H) without copying k and v per query head. 16-bit
  // operands with native GEMMs on the CPU take dtrain's, whose products are all 16-bit GEMMs (ATen's
  // CPU backward multiplies in fp32 without AMX; docs/decisions.md); everything else ATen's.
  const bool gqa = KV != H;
  // Under mixed precision the kernel's softmax sums in fp32 either way.
  auto core = [gqa, mp = mp_, hook = attention_core_](const std::vector<at::Tensor>& in) {
    const at::Tensor q = mp.operand(in[0]), k = mp.operand(in[1]), v = mp.operand(in[2]);
    if (hook) return hook(q, k, v);
    if (mp.enabled() && mp.native_gemm && flash_attention_serves(q, k, v)) return flash_attention(q, k, v, /*causal=*/true);
    return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true, std::nullopt, gqa);
  };
  auto y = (recompute_attention_core_ ? checkpoint(core, {q, k, v}) : core({q, k, v})).transpose(1, 2).reshape({B, T, H * head_dim_});
  return o_proj->product(y);
}

at::Tensor BlockImpl::mlp(const at::Tensor& x) {
  // Llama's SwiGLU: silu(gate)·up; GPT-2: GELU (tanh approximation) of up, whose bias is added inside
  // GELU's pass unless a parallelism runs up (it then adds the bias itself).
  if (!gate_proj) return down_proj->product(input_linears_ ? at::gelu(project(x, {up_proj.get()})[0], "tanh") : linear_gelu_tanh(*up_proj, x));
  const auto gate_up = project(x, {gate_proj.get(), up_proj.get()});
  const at::Tensor h = at::silu(gate_up[0]) * gate_up[1];
  return down_proj->product(h);
}

at::Tensor BlockImpl::forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  // attention() and mlp() end in their output layers' products: the bias is added with the residual,
  // in the same pass as the norm that follows.
  const ResidualAndNorm first = ln2->forward_residual(residual(x, attention(ln1(x), cos, sin), *o_proj));
  return add_residual(residual(first.residual, mlp(first.normed), *down_proj));
}

}  // namespace dtrain
