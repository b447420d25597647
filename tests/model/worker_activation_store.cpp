// A rank of the two-rank activation store test, started by `dtrain launch`. The world's two ranks
// stand for a tensor-parallel group: both build the same model and read the same tokens, so a block's
// input is the same on both, as under tensor parallelism. Prints "PASS <scenario>" for each scenario
// that holds; exits non-zero with a message on any difference.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <iostream>

#include "checkpointed_step.h"
#include "comm/world.h"
#include "launch/worker_env.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  std::cerr << "MISMATCH " << what << "\n";
}

// 7 elements over 2 ranks: 4 kept on rank 0, 3 on rank 1, and the gather gives back all 7.
void uneven(const std::shared_ptr<Group>& group) {
  ActivationStoreOptions o;
  o.partition = true;
  auto store = ActivationStore::make(o, group);
  const at::Tensor x = at::arange(7, at::kFloat).view({7, 1}).requires_grad_(true);
  const StoredActivation kept = store->save(x);
  expect(kept.piece().numel() == (group->rank() == 0 ? 4 : 3), "rank " + std::to_string(group->rank()) + " keeps " +
                                                                  std::to_string(kept.piece().numel()) + " of 7 elements");
  expect(store->held_elements() == kept.piece().numel(), "held elements");
  const at::Tensor back = kept.restore();
  expect(back.sizes().equals(x.sizes()) && at::equal(back, x.detach()), "the gathered input is the saved one");
  expect(kept.requires_grad(), "the saved input's requires_grad");
}

// The model's checkpointed block inputs, split over the two ranks, alone and with the other keys:
// each rank keeps half of each, and the gradients are those of keeping every activation.
void partition(const std::shared_ptr<Group>& group) {
  for (const std::string arch : {"gpt2", "llama"}) {
    const StepResult kept = checkpointed_step({arch, "none"});
    for (const auto& [host_memory, contiguous] : std::vector<std::pair<bool, bool>>{{false, false}, {false, true}, {true, false}, {true, true}}) {
      StepSetup setup{arch, "full"};
      setup.store.partition = true;
      setup.store.host_memory = host_memory;
      setup.store.contiguous = contiguous;
      setup.store.slots = 2;
      setup.partition_group = group;
      const StepResult split = checkpointed_step(setup);
      const std::string what = arch + " host " + std::to_string(host_memory) + " contiguous " + std::to_string(contiguous);
      std::string why;
      const bool same = same_bits(kept, split, why);
      expect(same, what + ": " + why);
      const int64_t half = split.block_input_numel / 2;
      expect(split.held_after_forward == 2 * half, what + ": kept " + std::to_string(split.held_after_forward) + " elements for 2 blocks of " +
                                                      std::to_string(split.block_input_numel) + ", want half");
      expect(split.held_after_backward == 0, what + ": elements kept after backward");
      expect(split.buffer_numel == (contiguous ? 2 * half : 0), what + ": buffer of " + std::to_string(split.buffer_numel));
    }
  }
}

}  // namespace

int main() {
  at::set_num_threads(1);
  try {
    auto world = World::init(WorldOptions{}, derive_worker_env(current_env()));
    const auto group = world->world_group();
    uneven(group);
    if (!failures) std::cout << "PASS uneven\n";
    partition(group);
    if (!failures) std::cout << "PASS partition\n";
  } catch (const std::exception& e) {
    std::cerr << "ERROR " << e.what() << "\n";
    return 1;
  }
  return failures ? 1 : 0;
}
