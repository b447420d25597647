// ZeRO-Offload's step on the host (parallel/zero/host_offload_optimizer.h). This machine has no
// accelerator, so host tensors stand in for the device's: every copy in and out still runs, and the
// update must equal the one made where the parameters are, bit for bit.
#include <gtest/gtest.h>
#include <torch/types.h>

#include "optim/flat_optimizer.h"
#include "parallel/zero/host_offload_optimizer.h"
#include "parallel/zero/nvme_optimizer.h"
#include "support/scratch.h"

namespace dtrain::test {
namespace {

// Two pieces whose state lies in the other order, as a ZeRO rank's pieces may.
std::vector<StatePiece> pieces_of(at::Tensor& params, const at::Tensor& grads, const Spans& decay, int64_t a) {
  const int64_t n = params.numel();
  return {{params.narrow(0, 0, a), grads.narrow(0, 0, a), spans_within(decay, 0, a), n - a},
          {params.narrow(0, a, n - a), grads.narrow(0, a, n - a), spans_within(decay, a, n - a), 0}};
}

TEST(HostOffloadOptimizer, UpdatesOnTheHostExactlyLikeWhereTheParametersLive) {
  const int64_t n = 10007, a = 3001;
  const Spans decay = {{0, 500}, {700, 4000}, {9000, 1007}};
  const nlohmann::json spec = {{"type", "AdamW"}, {"params", {{"weight_decay", 0.1}}}};
  for (const bool nvme : {false, true})
    for (const bool params_on_host : {false, true}) {
      torch::manual_seed(5);
      at::Tensor expected = torch::randn({n}), got = expected.clone();
      auto in_place = make_flat_optimizer(spec, expected);
      std::unique_ptr<ElementwiseOptimizer> inner =
          nvme ? std::unique_ptr<ElementwiseOptimizer>(std::make_unique<NvmeOptimizer>(make_elementwise_rule(spec), n, expected.options(),
                                                                                       NvmeOffloadOptions{scratch_dir("host_offload"), 4000}))
               : make_flat_optimizer(spec, at::empty({n}));
      HostOffloadOptimizer offloaded(std::move(inner), n, expected.options(), expected.device(), params_on_host);
      for (int step = 0; step < 3; ++step) {
        const at::Tensor g = torch::randn({n});
        in_place->step_pieces(pieces_of(expected, g, decay, a), 0.01, {});
        offloaded.step_pieces(pieces_of(got, g, decay, a), 0.01, {});
      }
      const std::string what = std::string(nvme ? "state on NVMe" : "state in host memory") +
                               (params_on_host ? ", parameters on the host" : ", parameters staged");
      EXPECT_TRUE(torch::equal(expected, got)) << what;
      for (const auto& [name, t] : in_place->state()) EXPECT_TRUE(torch::equal(t, offloaded.state().at(name))) << what << " " << name;
      EXPECT_EQ(offloaded.resident_bytes(), 0) << what;
      // The state (two moments and the step count; on NVMe three sets of buffers) and the staged
      // gradients, and the parameters when staged.
      const int64_t state_bytes = nvme ? 3 * 2 * 4000 * 4 : 2 * n * 4 + 8;
      EXPECT_EQ(offloaded.host_bytes(), state_bytes + n * 4 * (params_on_host ? 1 : 2)) << what;
    }
}

// The staging buffers stay on the CPU whatever the device, page-locked only for CUDA.
TEST(HostOffloadOptimizer, StagesOnTheHostPageLockedOnlyForCuda) {
  const at::TensorOptions host = host_staging_options(at::TensorOptions().dtype(at::kFloat), at::Device(at::kCPU));
  EXPECT_EQ(host.device(), at::Device(at::kCPU));
  EXPECT_FALSE(host.pinned_memory());
  const at::TensorOptions cuda = host_staging_options(at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, 0), at::Device(at::kCUDA, 0));
  EXPECT_EQ(cuda.device(), at::Device(at::kCPU));
  EXPECT_TRUE(cuda.pinned_memory());
  EXPECT_EQ(cuda.dtype(), at::kFloat);
}

}  // namespace
}  // namespace dtrain::test
