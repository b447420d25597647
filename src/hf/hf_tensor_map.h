// Which Hugging Face tensor holds each of dtrain's parameters. Llama's names differ from dtrain's by
// their prefixes alone. GPT-2's linear layers are Conv1D modules, whose weights are stored
// transposed ([in, out]), and its q, k and v are one fused c_attn along the output dim: dtrain's
// q_proj.weight is columns [0, d) of c_attn.weight transposed, k_proj the next d, v_proj the last.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/transformer_config.h"

namespace dtrain {

// A Hugging Face tensor, with the parameters of dtrain it is made of, concatenated along its output
// dim (dim 0 of dtrain's [out, in] weights and of biases) in order.
struct HfTensor {
  std::string name;             // "transformer.h.0.attn.c_attn.weight"
  std::vector<int64_t> shape;   // as stored
  std::vector<std::string> parts;
  bool transposed = false;      // stored [in, out]: a Conv1D weight
};

// Every tensor of the Hugging Face model of `c` whose learned position table holds `positions`
// rows (dtrain's holds seq_len of them, its first), in the order an export writes them. A tied head
// has no tensor of its own, as transformers saves it.
std::vector<HfTensor> hf_tensors(const TransformerConfig& c, int64_t positions);

// Where dtrain's parameter `name` lies in its Hugging Face tensor: the tensor, and the first row of
// the output dim that holds the parameter's dim 0.
struct HfSource {
  const HfTensor* tensor = nullptr;
  int64_t offset = 0;
};
// Throws std::logic_error for a name no tensor holds (the map and parameter_shapes disagree).
HfSource hf_source(const std::vector<HfTensor>& tensors, const TransformerConfig& c, const std::string& name);

}  // namespace dtrain
