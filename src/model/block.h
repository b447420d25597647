// One transformer block, pre-norm: x + attention(ln1(x)), then h + mlp(ln2(h)). Its layers carry
// Hugging Face's names (ln1, q_proj, k_proj, v_proj, o_proj, ln2, then gate_proj, up_proj, down_proj
// for Llama's SwiGLU or up_proj, down_proj for GPT-2's GELU MLP). Attention takes its head counts
// from what its projections return: q's features over the head size are the query heads, k's the
// key/value heads, so a block whose projections compute a slice of the heads (tensor parallelism)
// computes its slice with no change here.
#pragma once
#include <torch/nn/module.h>

#include <vector>

#include "model/linear.h"
#include "model/norm.h"
#include "model/transformer_config.h"

namespace dtrain {

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const TransformerConfig& c);
  // x [batch, T, d_model] → the same shape. cos and sin [≥ T', head_dim/2] are RoPE's tables for
  // Llama (their first T' rows serve attention's T' tokens, which under sequence parallelism are
  // more than x's), undefined tensors for GPT-2.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);
  // Recompute QKᵀ, softmax and ·V in backward instead of keeping what they save.
  void recompute_attention_core(bool on) { recompute_attention_core_ = on; }
  // What the matmuls and attention compute in (see TransformerImpl::set_precision).
  void set_precision(const MixedPrecision& mp);
  // The layers whose weights are matmul operands, which mixed precision keeps working copies of.
  std::vector<Linear> matmul_layers() const;
  // How the layers that read one input run together: q, k, v; gate and up (layer_hooks.h).
  void set_input_linears(InputLinears run) { input_linears_ = std::move(run); }
  // What attention's core (softmax(QKᵀ)·V) becomes (layer_hooks.h); it receives the operands in the
  // mixed-precision type.
  void set_attention_core(AttentionCore core) { attention_core_ = std::move(core); }

  Norm ln1{nullptr}, ln2{nullptr};
  Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};  // gate_proj: Llama only

 private:
  // Each returns its output layer's product without the bias, which forward adds with the residual.
  at::Tensor attention(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);
  at::Tensor mlp(const at::Tensor& x);
  std::vector<at::Tensor> project(const at::Tensor& x, const std::vector<LinearImpl*>& layers);

  int64_t head_dim_;
  bool recompute_attention_core_ = false;
  MixedPrecision mp_;
  InputLinears input_linears_;
  AttentionCore attention_core_;
};
TORCH_MODULE(Block);

}  // namespace dtrain
