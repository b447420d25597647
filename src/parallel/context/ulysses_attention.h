// Ulysses attention (DeepSpeed-Ulysses, Jacobs et al., 2023): an all-to-all over the cp ranks turns
// sequence shards into head shards, each rank attends its heads over the whole sequence, and a second
// all-to-all turns the result back. Two all-to-alls of q/k/v/out each, whatever cp, against ring
// attention's cp-1 hops of k/v; but cp can be at most the number of kv heads.
#pragma once
#include <ATen/ATen.h>

#include <memory>

#include "comm/group.h"

namespace dtrain {

// q [B,H,T/cp,hd], k, v [B,KV,T/cp,hd]: this rank's contiguous run of tokens (the contiguous
// SequenceLayout), group rank r holding run r. Returns [B,H,T/cp,hd], differentiable. Rank r attends
// q heads [r*H/cp, (r+1)*H/cp) with kv heads [r*KV/cp, (r+1)*KV/cp), which keeps each query head with
// its kv head under grouped-query attention. std::invalid_argument naming model.n_head /
// model.n_kv_head and parallel.cp when H or KV is not divisible by cp.
at::Tensor ulysses_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::shared_ptr<Group>& group,
                             bool causal);

}  // namespace dtrain
