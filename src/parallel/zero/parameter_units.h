// ZeRO stage 3's units: the parameters gathered before use and freed after, together. Each
// transformer block is a unit, and so is each run of the other parameters that lie together in the
// flat buffer: its order is backward's, so the final norm and head come first and the embeddings
// last. Units are then consecutive entries, and the flat layout is the same at every stage. Under
// mixed precision a part's weights used only by its matmuls (which read only their 16-bit working
// copies) form a unit of their own, gathered in 16 bits; the layout keeps them together for that.
// Which part a parameter belongs to comes from the model's own list of its parts
// (TransformerImpl::forward_parts), not from its name.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/forward_part_hooks.h"
#include "parallel/ddp/grad_bucket.h"

namespace dtrain {

// The forward part of each parameter of a model, by its name.
class ParameterParts {
 public:
  explicit ParameterParts(const std::vector<ForwardPart>& parts);
  // The index of the part `name` belongs to; throws std::invalid_argument naming a parameter that
  // no part lists.
  int of(const std::string& name) const;
  // One past the highest part index.
  int end() const { return end_; }

 private:
  std::unordered_map<std::string, int> part_;
  int end_ = 0;
};

// Whether `t` is one of `list` (the same tensor, not equal values).
bool is_one_of(const at::Tensor& t, const std::vector<at::Tensor>& list);

// `named` (registration order) with each forward part's `matmul_only` weights moved, in their order,
// after the part's other parameters: the flat layout (reverse registration order) then starts each
// part with them. Every stage and precision uses this layout.
std::vector<std::pair<std::string, at::Tensor>> group_matmul_weights(const std::vector<std::pair<std::string, at::Tensor>>& named,
                                                                    const ParameterParts& parts,
                                                                    const std::vector<at::Tensor>& matmul_only);

// A parameter cut into units of whole rows, of equal size but the last and none over `max_numel`
// elements: a table the model reads by blocks of rows (model/row_blocked_table.h), so that no unit is
// the table's size. No name: nothing is cut.
struct RowSplit {
  std::string name;
  int64_t row_numel = 0;
  int64_t max_numel = 0;
};

// One bucket per unit: the longest runs of consecutive entries in the same forward part, split where
// entries in `gathered_16bit` (the matmul-only weights, under mixed precision) or those `kept_whole`
// names (units marked whole) begin or end, and the parameter `split` names cut into units of its own
// (GradBucket's entries then 1 for each, its offset and numel those of the rows).
std::vector<GradBucket> make_unit_buckets(const std::vector<FlatEntry>& entries, const ParameterParts& parts,
                                          const std::vector<at::Tensor>& gathered_16bit = {}, const RowSplit& split = {},
                                          const KeptWhole& kept_whole = nullptr);

// Whether `unit` covers only part of its one entry (a unit of rows of a RowSplit parameter).
bool is_row_unit(const GradBucket& unit, const std::vector<FlatEntry>& entries);

}  // namespace dtrain
