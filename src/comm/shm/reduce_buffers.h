// Element-wise reduction of members' buffers into one, for the shared-memory collectives.
#pragma once
#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <vector>

namespace dtrain::shm {

// out = inputs[0] op inputs[1] op ... (Sum, Max or Min over `numel` elements of `dtype`), applied in
// input order, so every member that reduces the same inputs gets the same bits. `out` may be one of
// the inputs; it then starts from its own value. Max and Min propagate NaN.
void reduce_buffers(char* out, const std::vector<const char*>& inputs, int64_t numel, at::ScalarType dtype,
                    c10d::ReduceOp::RedOpType op);

}  // namespace dtrain::shm
