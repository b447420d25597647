// A 64-bit fingerprint of parameter values, bit for bit: the sum of each tensor's 32-bit patterns,
// weighted by the tensor's position. Any changed bit of any element changes it (but for changes that
// cancel exactly, which neither a fault nor a missed collective makes), so ranks that hold the same
// parameters agree on it and ranks that do not, disagree.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace dtrain {

// `params` are fp32 (the master weights; 4-byte elements in general).
int64_t parameter_fingerprint(const std::vector<at::Tensor>& params);

}  // namespace dtrain
