// Where activation checkpointing keeps the inputs it saves for recomputation, as DeepSpeed's
// activation_checkpointing keys say (runtime/activation_checkpointing/checkpointing.py):
//   partition: each rank of a group keeps 1/size of the flattened input, and the group all-gathers
//     the whole before the recomputation. Only for an input every rank of the group holds alike
//     (a block's input under tensor parallelism), or the gather would mix different tensors.
//   host_memory: the kept elements live in host memory and go back to the input's device for the
//     recomputation; an input already in host memory stays where it is.
//   contiguous: the kept elements go into slots of one buffer allocated at the first save, `slots`
//     of them as large as that input's kept elements, instead of an allocation each.
// A store that changes nothing for an input (one rank, no host copy, no buffer) takes no part: the
// checkpoint saves it as autograd saves any tensor.
#pragma once
#include <ATen/ATen.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/group.h"

namespace dtrain {

struct ActivationStoreOptions {
  bool partition = false;    // activation_checkpointing.partition_activations
  bool host_memory = false;  // activation_checkpointing.cpu_checkpointing
  bool contiguous = false;   // activation_checkpointing.contiguous_memory_optimization
  int slots = 0;             // activation_checkpointing.number_checkpoints: the buffer's slots (contiguous)

  bool any() const { return partition || host_memory || contiguous; }
};

class ActivationStore;

// One saved input. Its memory (or buffer slot) is given back when it is destroyed.
class StoredActivation {
 public:
  // The whole input on its device, gathered from the group's pieces when partitioned. It may be a
  // view of the kept memory: use it while this is alive.
  at::Tensor restore() const;
  // The elements this rank keeps.
  const at::Tensor& piece() const { return piece_; }
  bool requires_grad() const { return requires_grad_; }

 private:
  friend class ActivationStore;
  std::shared_ptr<ActivationStore> store_;
  at::Tensor piece_;
  std::vector<int64_t> shape_;
  at::Device device_{at::kCPU};
  int64_t numel_ = 0;
  bool requires_grad_ = false;
  std::shared_ptr<void> held_;  // gives the elements (and the slot) back to the store
};

class ActivationStore : public std::enable_shared_from_this<ActivationStore> {
 public:
  // `group` is what `partition` splits over; null or a group of one rank leaves inputs whole. Null
  // when the options ask for nothing.
  static std::shared_ptr<ActivationStore> make(const ActivationStoreOptions& options, std::shared_ptr<Group> group);

  // Whether save() changes how `input` is kept: a floating-point input that is split, moved to host
  // memory or copied into the buffer.
  bool takes(const at::Tensor& input) const;
  StoredActivation save(const at::Tensor& input);

  const ActivationStoreOptions& options() const { return options_; }
  int partitions() const { return group_ ? group_->size() : 1; }
  // Elements kept by the saved inputs alive now (each rank's own pieces).
  int64_t held_elements() const { return held_elements_; }
  // The buffer the contiguous slots live in; undefined before the first save or without `contiguous`.
  at::Tensor buffer() const;

 private:
  ActivationStore(const ActivationStoreOptions& options, std::shared_ptr<Group> group);
  friend class StoredActivation;
  at::Tensor gather(const at::Tensor& piece, int64_t numel, const at::Device& device) const;
  // A slot of the buffer for `numel` elements like `like`, and its index.
  std::pair<at::Tensor, int> take_slot(int64_t numel, const at::TensorOptions& like);
  void give_back(int slot, int64_t numel);

  ActivationStoreOptions options_;
  std::shared_ptr<Group> group_;  // null: one rank
  std::atomic<int64_t> held_elements_{0};
  mutable std::mutex mutex_;    // the buffer and its slots: saves in forward, releases in backward
  at::Tensor buffer_;           // options_.slots slots of slot_numel_ elements
  int64_t slot_numel_ = 0;
  std::vector<bool> slot_used_;
};

}  // namespace dtrain
