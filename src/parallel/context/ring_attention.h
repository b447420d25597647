// Ring attention (Liu et al., 2023): each cp rank holds its tokens' q, k and v; the k/v chunks
// travel once round the ring of cp ranks while every rank attends its queries to the chunk it holds,
// and the partial results are merged by the log-sum-exp (online softmax) rule. The next chunk's
// transfer is posted before the current chunk's compute, so the communication hides behind it.
#pragma once
#include <ATen/ATen.h>

#include <memory>

#include "comm/group.h"
#include "parallel/context/sequence_layout.h"

namespace dtrain {

// q [B,H,T_local,hd], k, v [B,KV,T_local,hd]: this rank's tokens in `layout` order (zigzag or
// contiguous), the same layout on every member of `group` (group rank == layout.rank). Returns
// [B,H,T_local,hd] in q's dtype, differentiable. Blocks a causal mask hides entirely are skipped;
// only the KV heads travel; merging is in fp32. Backward sends k/v round again while the dk/dv
// accumulator of each chunk travels with it back to its owner. A group of one communicates nothing.
at::Tensor ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::shared_ptr<Group>& group,
                          const SequenceLayout& layout, bool causal);

// The causal score blocks (chunk_len x chunk_len, a diagonal block counting 1/2) rank r computes over
// a whole ring pass: 2*cp for every r under zigzag, r + 1/2 under the contiguous layout.
double causal_score_blocks(const SequenceLayout& layout, int r);

}  // namespace dtrain
