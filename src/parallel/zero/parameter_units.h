// ZeRO stage 3's units: the parameters gathered before use and freed after, together. Each
// transformer block is a unit, and so is each run of the other parameters that lie together in the
// flat buffer: its order is backward's, so the final norm and head come first and the embeddings
// last. Units are then consecutive entries, and the flat layout is the same at every stage. Under
// mixed precision a part's weights used only by its matmuls (which read only their 16-bit working
// copies) form a unit of their own, gathered in 16 bits; the layout keeps them together for that.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "parallel/ddp/grad_bucket.h"

namespace dtrain {

// The forward part (model/forward_part_hooks.h) a parameter named like blocks.3.qkv.weight, wte.weight
// or ln_f.bias belongs to, in a model of `n_layer` blocks.
int forward_part_of(const std::string& name, int n_layer);

// Whether `t` is one of `list` (the same tensor, not equal values).
bool is_one_of(const at::Tensor& t, const std::vector<at::Tensor>& list);

// `named` (registration order) with each forward part's `matmul_only` weights moved, in their order,
// after the part's other parameters: the flat layout (reverse registration order) then starts each
// part with them. Every stage and precision uses this layout.
std::vector<std::pair<std::string, at::Tensor>> group_matmul_weights(const std::vector<std::pair<std::string, at::Tensor>>& named,
                                                                    int n_layer, const std::vector<at::Tensor>& matmul_only);

// One bucket per unit: the longest runs of consecutive entries in the same forward part, split where
// entries in `gathered_16bit` (the matmul-only weights, under mixed precision) begin or end.
std::vector<GradBucket> make_unit_buckets(const std::vector<FlatEntry>& entries, int n_layer,
                                          const std::vector<at::Tensor>& gathered_16bit = {});

}  // namespace dtrain
