// The parameter names of dtrain's release before q, k and v were separate parameters, mapped to
// today's. That release fused parameters a block now keeps apart, and named some others differently
// (each with .weight and, GPT-2, .bias; the fused rows in the order listed):
//   blocks.N.qkv      = q_proj, k_proj, v_proj  (Llama: q has n_head·head_dim rows, k and v n_kv_head·head_dim each)
//   blocks.N.proj     = o_proj
//   blocks.N.fc       = gate_proj, up_proj      (Llama, gate first, as its h.chunk(2, -1) split it; GPT-2: up_proj alone)
//   blocks.N.fc_proj  = down_proj
// wte, wpe, ln1, ln2, ln_f and lm_head kept their names. Each of today's tensors is then a box of the
// earlier one, its rows shifted by the rows of the parts before it: a piece of it (a box, with a flat
// range relative to the box) is read from the earlier tensor with its dim-0 offset moved, so a ZeRO
// range maps unchanged. The optimizer's per-parameter state carries the parameter's name after its
// own prefix ("optimizer/exp_avg/blocks.0.qkv.weight") and maps the same way.
//
// The map is worked out from the tensors the model expects and those a checkpoint stores, by name and
// shape alone: the rows of each part are the model's, so a model of any shape (grouped-query
// attention, any d_ff) maps without its config.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "ckpt/sharded_checkpoint.h"

namespace dtrain {

// Where one of today's tensors lies in an earlier fused one: rows [row_offset, row_offset + its rows).
struct EarlierSource {
  std::string tensor;  // the stored tensor, e.g. "model/blocks.0.qkv.weight"
  int64_t row_offset = 0;
};

struct EarlierNames {
  std::map<std::string, EarlierSource> sources;  // each expected tensor the checkpoint holds under its earlier name alone
  std::map<std::string, GlobalTensor> fused;     // each earlier tensor they come from: the shape and dtype its parts add up to
  bool empty() const { return sources.empty(); }
};

// The expected tensors (keys as the checkpoint's: "model/blocks.0.q_proj.weight") that `stored`
// lacks but holds under their earlier name, and the earlier tensors they map to. A tensor stored
// under neither name is left out, to be named as missing.
EarlierNames earlier_names(const std::map<std::string, GlobalTensor>& expected, const std::map<std::string, GlobalTensor>& stored);

// `expected` as the checkpoint holds it: the mapped tensors replaced by the earlier ones they come from.
std::map<std::string, GlobalTensor> as_stored(const std::map<std::string, GlobalTensor>& expected, const EarlierNames& names);

}  // namespace dtrain
