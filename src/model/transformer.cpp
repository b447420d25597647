#include "model/transformer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/loss.h>

#include <cmath>
#include <functional>

namespace dtrain {

namespace {
at::Tensor empty_param(std::initializer_list<int64_t> shape) { return torch::empty(shape); }
}  // namespace

ParamGroupImpl::ParamGroupImpl(at::Tensor w, at::Tensor b) {
  weight = register_parameter("weight", std::move(w));
  if (b.defined()) bias = register_parameter("bias", std::move(b));
}

at::Tensor ParamGroupImpl::linear(const MixedPrecision& mp, const at::Tensor& x) const {
  return mixed_linear(mp, x, weight, working, bias);
}

void ParamGroupImpl::refresh_working_copy(const MixedPrecision& mp) {
  at::NoGradGuard no_grad;
  if (!mp.enabled()) {
    working = at::Tensor();
  } else if (!working.defined() || working.scalar_type() != mp.compute || working.device() != weight.device()) {
    working = weight.detach().to(mp.compute);
  } else {
    working.copy_(weight.detach());
  }
}

BlockImpl::BlockImpl(const TransformerConfig& c) : c_(c) {
  const int64_t d = c.d_model, hd = c.head_dim(), qkv_out = (c.n_head + 2 * c.kv_heads()) * hd;
  const int64_t fc_out = c.is_llama() ? 2 * c.ff_dim() : c.ff_dim();
  // GPT-2 has biases everywhere; Llama has none.
  auto bias = [&c](int64_t n) { return c.is_llama() ? at::Tensor() : torch::zeros({n}); };
  ln1 = register_module("ln1", ParamGroup(torch::ones({d}), bias(d)));
  qkv = register_module("qkv", ParamGroup(empty_param({qkv_out, d}), bias(qkv_out)));
  proj = register_module("proj", ParamGroup(empty_param({d, d}), bias(d)));
  ln2 = register_module("ln2", ParamGroup(torch::ones({d}), bias(d)));
  fc = register_module("fc", ParamGroup(empty_param({fc_out, d}), bias(fc_out)));
  fc_proj = register_module("fc_proj", ParamGroup(empty_param({d, c.ff_dim()}), bias(d)));
}

namespace {
// LayerNorm for GPT-2, RMSNorm for Llama.
// Norms compute in fp32 whatever the precision: the residual stream they read is fp32.
at::Tensor norm(const TransformerConfig& c, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  if (!c.is_llama()) return at::layer_norm(x, {c.d_model}, w, b, c.norm_eps);
  return x * at::rsqrt(x.pow(2).mean(-1, true) + c.norm_eps) * w;
}

// Rotates each head's halves (the "rotate half" form of RoPE): x·cos + rotate(x)·sin.
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1);
}
}  // namespace

at::Tensor BlockImpl::attention(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t B = x.size(0), T = x.size(1), H = c_.n_head, KV = c_.kv_heads(), hd = c_.head_dim();
  auto packed = qkv->linear(mp_, x);
  auto q = packed.narrow(2, 0, H * hd).view({B, T, H, hd}).transpose(1, 2);
  auto k = packed.narrow(2, H * hd, KV * hd).view({B, T, KV, hd}).transpose(1, 2);
  auto v = packed.narrow(2, (H + KV) * hd, KV * hd).view({B, T, KV, hd}).transpose(1, 2);
  if (cos.defined()) {  // in fp32, like the tables
    q = apply_rope(q.to(at::kFloat), cos, sin);
    k = apply_rope(k.to(at::kFloat), cos, sin);
  }
  // ATen's fused attention: on the CPU a flash-attention kernel that skips the blocks the causal mask
  // hides and never materialises the T×T scores; grouped-query heads (KV < H) are served without
  // copying k and v per query head.
  const bool gqa = KV != H;
  // Under mixed precision the kernel's softmax sums in fp32 either way.
  auto core = [gqa, mp = mp_](const std::vector<at::Tensor>& in) {
    return at::scaled_dot_product_attention(mp.operand(in[0]), mp.operand(in[1]), mp.operand(in[2]), {}, 0.0,
                                            /*is_causal=*/true, std::nullopt, gqa);
  };
  auto y = (recompute_attention_core_ ? checkpoint(core, {q, k, v}) : core({q, k, v})).transpose(1, 2).reshape({B, T, H * hd});
  return proj->linear(mp_, y);
}

at::Tensor BlockImpl::mlp(const at::Tensor& x) {
  auto h = fc->linear(mp_, x);
  if (c_.is_llama()) {
    auto gate_up = h.chunk(2, -1);
    h = at::silu(gate_up[0]) * gate_up[1];
  } else {
    h = at::gelu(h, "tanh");
  }
  return fc_proj->linear(mp_, h);
}

at::Tensor BlockImpl::forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  auto h = x + attention(norm(c_, x, ln1->weight, ln1->bias), cos, sin);
  return h + mlp(norm(c_, h, ln2->weight, ln2->bias));
}

TransformerImpl::TransformerImpl(const TransformerConfig& c, uint64_t seed) : c_(c) {
  c.validate();
  const bool gpt2 = !c.is_llama();
  wte = register_module("wte", ParamGroup(empty_param({c.vocab_size, c.d_model}), at::Tensor()));
  if (gpt2) wpe = register_module("wpe", ParamGroup(empty_param({c.seq_len, c.d_model}), at::Tensor()));
  blocks_ = register_module("blocks", torch::nn::ModuleList());
  for (int i = 0; i < c.n_layer; ++i) blocks_->push_back(Block(c));
  ln_f = register_module("ln_f", ParamGroup(torch::ones({c.d_model}), gpt2 ? torch::zeros({c.d_model}) : at::Tensor()));
  if (!c.tie_embeddings) lm_head = register_module("lm_head", ParamGroup(empty_param({c.vocab_size, c.d_model}), at::Tensor()));
  initialise(seed);
}

void TransformerImpl::set_activation_checkpointing(const ActivationCheckpointing& ac) {
  ac_ = ac;
  for (auto& block : *blocks_) block->as<BlockImpl>()->recompute_attention_core(ac.attention_core());
}

void TransformerImpl::set_precision(const MixedPrecision& mp) {
  mp_ = mp;
  for (auto& block : *blocks_) block->as<BlockImpl>()->set_precision(mp);
  refresh_working_copy();
}

std::vector<ParamGroup> TransformerImpl::matmul_groups() const {
  std::vector<ParamGroup> groups = {c_.tie_embeddings ? wte : lm_head};
  for (const auto& block : *blocks_)
    for (const auto& group : block->as<BlockImpl>()->matmul_groups()) groups.push_back(group);
  return groups;
}

std::vector<at::Tensor> TransformerImpl::matmul_only_weights() const {
  std::vector<at::Tensor> weights;
  for (const auto& group : matmul_groups())
    if (!c_.tie_embeddings || group.get() != wte.get()) weights.push_back(group->weight);
  return weights;
}

void TransformerImpl::refresh_working_copy() {
  for (auto& group : matmul_groups()) group->refresh_working_copy(mp_);
}

void TransformerImpl::initialise(uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const double residual_std = 0.02 / std::sqrt(2.0 * c_.n_layer);
  torch::NoGradGuard no_grad;
  for (auto& item : named_parameters()) {
    if (item.value().dim() < 2) continue;  // biases start at zero, norm weights at one
    const auto& name = item.key();
    const bool residual = name.size() >= 11 && name.compare(name.size() - 11, 11, "proj.weight") == 0;
    item.value().normal_(0.0, residual ? residual_std : 0.02, gen);
  }
}

void TransformerImpl::prepare_rope(int64_t T, const at::Device& device) {
  if (!c_.is_llama() || (rope_cos_.defined() && rope_cos_.size(0) == T && rope_cos_.device() == device)) return;
  const int64_t half = c_.head_dim() / 2;
  auto opts = torch::dtype(torch::kFloat64).device(device);
  auto inv_freq = torch::pow(c_.rope_theta, -torch::arange(0, half, opts) / double(half));
  auto angles = torch::outer(torch::arange(0, T, opts), inv_freq);  // [T, half]
  rope_cos_ = angles.cos().to(torch::kFloat32);
  rope_sin_ = angles.sin().to(torch::kFloat32);
}

at::Tensor TransformerImpl::forward(const at::Tensor& tokens) {
  const int64_t T = tokens.size(1);
  TORCH_CHECK(T <= c_.seq_len, "sequence of ", T, " tokens is longer than model.seq_len ", c_.seq_len);
  prepare_rope(T, tokens.device());
  // Around each part, outside its activation checkpoint: a recomputation in backward is not a new part.
  auto part = [this](int index, const std::function<at::Tensor()>& run) {
    if (hooks_) hooks_->before_part(index);
    at::Tensor out = run();
    if (hooks_) hooks_->after_part(index, out);
    return out;
  };
  auto x = part(0, [&] {
    auto e = at::embedding(wte->weight, tokens);
    return wpe ? e + wpe->weight.narrow(0, 0, T) : e;
  });
  for (int i = 0; i < c_.n_layer; ++i) {
    auto* block = (*blocks_)[i]->as<BlockImpl>();
    auto whole = [block, cos = rope_cos_, sin = rope_sin_](const std::vector<at::Tensor>& in) {
      return block->forward(in[0], cos, sin);
    };
    x = part(i + 1, [&] { return ac_.whole_block(i) ? checkpoint(whole, {x}) : whole({x}); });
  }
  return part(c_.n_layer + 1, [&] { return (c_.tie_embeddings ? wte : lm_head)->linear(mp_, norm(c_, x, ln_f->weight, ln_f->bias)); });
}

at::Tensor TransformerImpl::loss(const at::Tensor& tokens, const at::Tensor& targets) {
  auto logits = forward(tokens);
  // In fp32: the log-sum-exp over the vocabulary is where 16 bits lose most.
  return torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}).to(at::kFloat), targets.reshape({-1}));
}

std::vector<std::string> parameter_names(const TransformerConfig& c) {
  TransformerConfig narrow = c;
  narrow.n_head = 1;
  narrow.n_kv_head = 0;
  narrow.d_model = 2;  // even, for RoPE
  narrow.d_ff = 1;
  narrow.seq_len = 1;
  narrow.vocab_size = 2;
  std::vector<std::string> names;
  for (const auto& item : Transformer(narrow, 0)->named_parameters()) names.push_back(item.key());
  return names;
}

}  // namespace dtrain
