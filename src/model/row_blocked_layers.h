// The tied table's two readers, the token lookup and the output head, over a RowBlockedTable: each
// block of rows is made whole, used and released in turn, the next one prefetched while one
// computes, and backward hands each block's gradient to the table instead of assembling the whole
// table's. Same arithmetic as Embedding and the tied head's Linear but for the order of sums the
// blocks split: the head's input gradient sums the blocks' products in fp32, and the lookup's rows
// reach the table apart from the head's gradient.
#pragma once
#include <ATen/ATen.h>

#include "model/mixed_precision.h"
#include "model/row_blocked_table.h"

namespace dtrain {

// The rows of `indices` [...] (int64): [..., dim], fp32. `weight` is the table's parameter, there for
// autograd (its values are not read): its gradient goes to table.row_gradients, sparse.
at::Tensor row_blocked_lookup(RowBlockedTable& table, const at::Tensor& weight, const at::Tensor& indices);

// x [..., dim] times the table's transpose: logits [..., rows] in the compute type of `mp`, as the
// tied head's mixed_linear computes them. Backward gathers the blocks again; x's gradient is fp32.
at::Tensor row_blocked_head(RowBlockedTable& table, const MixedPrecision& mp, const at::Tensor& weight, const at::Tensor& x);

}  // namespace dtrain
