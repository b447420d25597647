// The shared-memory reduction of members' buffers against ATen's own element-wise ops, on both of
// its paths (a plain loop for small counts, ATen's kernels for large ones), with NaNs.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "comm/shm/reduce_buffers.h"

namespace dtrain::shm {
namespace {

char* bytes(const at::Tensor& t) { return static_cast<char*>(t.data_ptr()); }

at::Tensor expected(const std::vector<at::Tensor>& in, c10d::ReduceOp::RedOpType op) {
  at::Tensor acc = in[0].clone();
  for (size_t i = 1; i < in.size(); ++i)
    acc = op == c10d::ReduceOp::SUM ? acc + in[i] : op == c10d::ReduceOp::MAX ? at::maximum(acc, in[i]) : at::minimum(acc, in[i]);
  return acc;
}

TEST(ReduceBuffers, BothPathsMatchATenForEveryDtypeAndOpIncludingNaN) {
  at::manual_seed(3);
  for (int64_t numel : {1, 7, 4096, 4097, 10000}) {  // 4096 and below: the loop; above: ATen
    for (auto dtype : {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf, at::kInt, at::kLong, at::kChar, at::kByte}) {
      for (auto op : {c10d::ReduceOp::SUM, c10d::ReduceOp::MAX, c10d::ReduceOp::MIN}) {
        std::vector<at::Tensor> in;
        for (int j = 0; j < 3; ++j) {
          at::Tensor t = at::randint(0, 40, {numel}, at::kLong).to(dtype);
          if (at::isFloatingType(dtype)) t = (t.to(at::kFloat) / 8).to(dtype);
          if (at::isFloatingType(dtype) && j == 1) t[0] = NAN;
          in.push_back(t);
        }
        const std::string what = std::string(c10::toString(dtype)) + " x" + std::to_string(numel) + " op " +
                                 std::to_string(int(op));
        at::Tensor out = at::empty({numel}, at::TensorOptions().dtype(dtype));
        reduce_buffers(bytes(out), {bytes(in[0]), bytes(in[1]), bytes(in[2])}, numel, dtype, op);
        const at::Tensor want = expected(in, op);
        EXPECT_TRUE(at::equal(out.isnan(), want.isnan())) << what;
        EXPECT_TRUE(at::equal(out.nan_to_num(0), want.nan_to_num(0))) << what;

        // In place: the output is the second input, and starts from its own value.
        at::Tensor second = in[1].clone();
        reduce_buffers(bytes(second), {bytes(in[0]), bytes(second), bytes(in[2])}, numel, dtype, op);
        EXPECT_TRUE(at::equal(second.nan_to_num(0), want.nan_to_num(0))) << what << " in place";
      }
    }
  }
}

}  // namespace
}  // namespace dtrain::shm
