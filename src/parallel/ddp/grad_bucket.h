// Gradient buckets: consecutive slices of the flat gradient buffer, each about `bucket_bytes` long.
// The flat buffer is in reverse registration order, so buckets fill roughly in the order backward
// produces gradients, and each bucket is one all-reduce of one contiguous slice (no copies).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "optim/flat_parameters.h"

namespace dtrain {

struct GradBucket {
  int64_t offset = 0, numel = 0;  // the slice of the flat gradient
  int first_entry = 0, entries = 0;  // FlatParameters::entries() covered
  // Under ZeRO, every rank keeps this bucket whole (parallel.modules zero_stage 0): its gradients are
  // all-reduced, its parameters and optimizer state not sharded.
  bool whole = false;
};

// Which parameters, by name, ZeRO keeps whole on every rank; null: none. Their buckets hold no other.
using KeptWhole = std::function<bool(const std::string& parameter_name)>;

// A parameter is never split across buckets; a bucket closes once it holds `bucket_bytes` or more,
// and where the entries pass from parameters `kept_whole` names to others or back.
std::vector<GradBucket> make_grad_buckets(const std::vector<FlatEntry>& entries, int64_t element_bytes,
                                          int64_t bucket_bytes, const KeptWhole& kept_whole = nullptr);

}  // namespace dtrain
