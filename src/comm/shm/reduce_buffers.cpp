#include "comm/shm/reduce_buffers.h"

#include <ATen/Dispatch.h>

#include <algorithm>

namespace dtrain::shm {
namespace {

// Below this many elements a plain loop beats ATen, whose three dispatches (a view, a copy, an add)
// cost microseconds, more than the arithmetic of a small message.
constexpr int64_t kLoopElements = 4096;

template <typename T>
T combine(T a, T b, c10d::ReduceOp::RedOpType op) {
  if (op == c10d::ReduceOp::SUM) return a + b;
  if (b != b) return b;  // NaN wins, as in at::maximum / at::minimum (a NaN in `a` survives the compare)
  return op == c10d::ReduceOp::MAX ? (a < b ? b : a) : (b < a ? b : a);
}

void reduce_loop(char* out, const std::vector<const char*>& inputs, size_t first, int64_t numel, at::ScalarType dtype,
                 c10d::ReduceOp::RedOpType op) {
  AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, dtype, "reduce_buffers", [&] {
    auto* acc = reinterpret_cast<scalar_t*>(out);
    if (inputs[first] != out) std::copy_n(reinterpret_cast<const scalar_t*>(inputs[first]), numel, acc);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (i == first) continue;
      const auto* x = reinterpret_cast<const scalar_t*>(inputs[i]);
      for (int64_t k = 0; k < numel; ++k) acc[k] = combine<scalar_t>(acc[k], x[k], op);
    }
  });
}

void reduce_aten(char* out, const std::vector<const char*>& inputs, size_t first, int64_t numel, at::ScalarType dtype,
                 c10d::ReduceOp::RedOpType op) {
  auto view = [&](const char* p) {
    return at::from_blob(const_cast<char*>(p), {numel}, at::TensorOptions().dtype(dtype));
  };
  at::Tensor acc = view(out);
  if (inputs[first] != out) acc.copy_(view(inputs[first]));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i == first) continue;
    at::Tensor x = view(inputs[i]);
    if (op == c10d::ReduceOp::SUM) acc.add_(x);
    else if (op == c10d::ReduceOp::MAX) at::maximum_out(acc, acc, x);
    else at::minimum_out(acc, acc, x);
  }
}

}  // namespace

void reduce_buffers(char* out, const std::vector<const char*>& inputs, int64_t numel, at::ScalarType dtype,
                    c10d::ReduceOp::RedOpType op) {
  auto own = std::find(inputs.begin(), inputs.end(), out);
  const size_t first = own == inputs.end() ? 0 : size_t(own - inputs.begin());
  if (numel <= kLoopElements) reduce_loop(out, inputs, first, numel, dtype, op);
  else reduce_aten(out, inputs, first, numel, dtype, op);
}

}  // namespace dtrain::shm
