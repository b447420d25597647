// The decoder-only transformer both architectures share. Parameter names follow nanoGPT
// (wte, wpe, blocks.N.{ln1,qkv,proj,ln2,fc,fc_proj}, ln_f, lm_head) so checkpoints read the same
// across archs; Llama's SwiGLU keeps gate and up projections fused in `fc`.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cstdint>

#include "model/activation_checkpoint.h"
#include "model/forward_part_hooks.h"
#include "model/mixed_precision.h"
#include "model/transformer_config.h"

namespace dtrain {

// A named weight (and optional bias), so parameters read "blocks.0.qkv.weight" as in nanoGPT.
class ParamGroupImpl : public torch::nn::Module {
 public:
  ParamGroupImpl(at::Tensor weight, at::Tensor bias);
  // x·weightᵀ + bias in the model's precision.
  at::Tensor linear(const MixedPrecision& mp, const at::Tensor& x) const;
  // Copies weight into its 16-bit working copy (made on first use); drops it in fp32.
  void refresh_working_copy(const MixedPrecision& mp);

  at::Tensor weight, bias;  // bias undefined when the layer has none
  at::Tensor working;       // weight in the compute type, for mixed precision: not a parameter
};
TORCH_MODULE(ParamGroup);

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const TransformerConfig& c);
  // `rope` is (cos, sin) for Llama, undefined tensors for GPT-2.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);
  // Recompute QKᵀ, softmax and ·V in backward instead of keeping what they save.
  void recompute_attention_core(bool on) { recompute_attention_core_ = on; }
  void set_precision(const MixedPrecision& mp) { mp_ = mp; }
  // The groups whose weights are matmul operands, which mixed precision keeps working copies of.
  std::vector<ParamGroup> matmul_groups() const { return {qkv, proj, fc, fc_proj}; }

 private:
  at::Tensor attention(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);
  at::Tensor mlp(const at::Tensor& x);

  TransformerConfig c_;
  bool recompute_attention_core_ = false;
  MixedPrecision mp_;
  ParamGroup ln1{nullptr}, qkv{nullptr}, proj{nullptr}, ln2{nullptr}, fc{nullptr}, fc_proj{nullptr};
};
TORCH_MODULE(Block);

class TransformerImpl : public torch::nn::Module {
 public:
  // Parameters are created on the CPU and initialised from `seed` alone (GPT-2's scheme: normal
  // std 0.02, residual projections 0.02/sqrt(2·layers), zero biases, unit norms), so every rank
  // builds the same model; move it with ->to(device) afterwards.
  TransformerImpl(const TransformerConfig& c, uint64_t seed);

  // tokens [batch, T] (int64, T ≤ seq_len) → logits [batch, T, vocab].
  at::Tensor forward(const at::Tensor& tokens);
  // Mean next-token cross-entropy of logits(tokens) against targets [batch, T].
  at::Tensor loss(const at::Tensor& tokens, const at::Tensor& targets);

  const TransformerConfig& config() const { return c_; }
  // What backward recomputes instead of keeping; the computed values are the same bits either way.
  void set_activation_checkpointing(const ActivationCheckpointing& ac);
  // What the matmuls compute in (fp32 by default). Working copies are made on the parameters'
  // device: set it after moving the model, then refresh_working_copy() after every change to them.
  void set_precision(const MixedPrecision& mp);
  const MixedPrecision& precision() const { return mp_; }
  // Rounds the parameters into their 16-bit working copies: once per optimizer step.
  void refresh_working_copy();
  // The groups whose weights are matmul operands, which mixed precision keeps working copies of.
  std::vector<ParamGroup> matmul_groups() const;
  // Their weights that nothing but the matmuls reads: under mixed precision they are used only as
  // their working copies. All but a tied embedding, which the token lookup reads in fp32.
  std::vector<at::Tensor> matmul_only_weights() const;
  // Called around each part of every forward pass (null: none). The hooks outlive the model's use.
  void set_part_hooks(ForwardPartHooks* hooks) { hooks_ = hooks; }

 private:
  void initialise(uint64_t seed);
  void prepare_rope(int64_t T, const at::Device& device);

  TransformerConfig c_;
  ParamGroup wte{nullptr}, wpe{nullptr}, ln_f{nullptr}, lm_head{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
  at::Tensor rope_cos_, rope_sin_;  // built lazily for the sequence length in use
  ActivationCheckpointing ac_;
  MixedPrecision mp_;
  ForwardPartHooks* hooks_ = nullptr;
};
TORCH_MODULE(Transformer);

// The parameter names a model of this config has ("wte.weight", "blocks.0.qkv.weight", ...), in
// registration order, without allocating it: they depend on the architecture, the depth and the
// tying alone, so they are read from a model of the same structure two elements wide.
std::vector<std::string> parameter_names(const TransformerConfig& c);

}  // namespace dtrain
