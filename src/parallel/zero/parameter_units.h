// ZeRO stage 3's units: the parameters gathered before use and freed after, together. Each
// transformer block is a unit, and so is each run of the other parameters that lie together in the
// flat buffer: its order is backward's, so the final norm and head come first and the embeddings
// last. Units are then consecutive entries, and the flat layout is the same at every stage.
#pragma once
#include <string>
#include <vector>

#include "parallel/ddp/grad_bucket.h"

namespace dtrain {

// The forward part (model/forward_part_hooks.h) a parameter named like blocks.3.qkv.weight, wte.weight
// or ln_f.bias belongs to, in a model of `n_layer` blocks.
int forward_part_of(const std::string& name, int n_layer);

// One bucket per unit: the longest runs of consecutive entries in the same forward part.
std::vector<GradBucket> make_unit_buckets(const std::vector<FlatEntry>& entries, int n_layer);

}  // namespace dtrain
