#include "model/activation_store.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "comm/collectives.h"

namespace dtrain {

namespace {

// What partition keeps per rank of `ranks`: an equal share, the last ones padded (in the gather).
int64_t share(int64_t numel, int ranks) { return (numel + ranks - 1) / ranks; }

std::string describe(int64_t numel, const at::TensorOptions& o) {
  return std::to_string(numel) + " " + std::string(c10::toString(o.dtype().toScalarType())) + " elements on " + o.device().str();
}

}  // namespace

std::shared_ptr<ActivationStore> ActivationStore::make(const ActivationStoreOptions& options, std::shared_ptr<Group> group) {
  if (!options.any()) return nullptr;
  if (options.contiguous && options.slots < 1)
    throw std::invalid_argument("activation_checkpointing.contiguous_memory_optimization needs a buffer of at least one slot "
                                "(activation_checkpointing.number_checkpoints), got " + std::to_string(options.slots));
  if (group && group->size() == 1) group = nullptr;
  if (!options.partition) group = nullptr;
  return std::shared_ptr<ActivationStore>(new ActivationStore(options, std::move(group)));
}

ActivationStore::ActivationStore(const ActivationStoreOptions& options, std::shared_ptr<Group> group)
    : options_(options), group_(std::move(group)) {}

bool ActivationStore::takes(const at::Tensor& input) const {
  return input.is_floating_point() && (partitions() > 1 || options_.contiguous || (options_.host_memory && !input.device().is_cpu()));
}

StoredActivation ActivationStore::save(const at::Tensor& input) {
  StoredActivation s;
  s.store_ = shared_from_this();
  s.shape_ = input.sizes().vec();
  s.device_ = input.device();
  s.numel_ = input.numel();
  s.requires_grad_ = input.requires_grad();
  const int64_t per_rank = share(s.numel_, partitions());
  const int64_t begin = std::min(s.numel_, (group_ ? group_->rank() : 0) * per_rank);
  const int64_t count = std::min(s.numel_, begin + per_rank) - begin;
  // Host memory is the point of cpu_checkpointing; pinned, so the copies to and from the device are direct.
  const bool to_host = options_.host_memory && !s.device_.is_cpu();
  const auto where = at::TensorOptions().dtype(input.scalar_type()).device(to_host ? at::Device(at::kCPU) : s.device_).pinned_memory(to_host);
  int slot = -1;
  if (options_.contiguous) std::tie(s.piece_, slot) = take_slot(count, where);
  else s.piece_ = at::empty({count}, where);
  held_elements_ += count;
  s.held_ = std::shared_ptr<void>(nullptr, [store = shared_from_this(), slot, count](void*) { store->give_back(slot, count); });
  s.piece_.copy_(input.detach().reshape({-1}).narrow(0, begin, count));
  return s;
}

at::Tensor StoredActivation::restore() const {
  const at::Tensor here = piece_.to(device_);
  const at::Tensor flat = store_->partitions() > 1 ? store_->gather(here, numel_, device_) : here;
  return flat.view(shape_);
}

// Every rank's piece, in group-rank order, is the flattened input (with the last shares padded).
at::Tensor ActivationStore::gather(const at::Tensor& piece, int64_t numel, const at::Device& device) const {
  const int64_t per_rank = share(numel, partitions());
  at::Tensor send = piece;
  if (piece.numel() != per_rank) {
    send = at::zeros({per_rank}, piece.options().device(device));
    send.narrow(0, 0, piece.numel()).copy_(piece);
  }
  return all_gather(*group_, send, "gather a checkpointed activation").narrow(0, 0, numel);
}

std::pair<at::Tensor, int> ActivationStore::take_slot(int64_t numel, const at::TensorOptions& like) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool idle = std::none_of(slot_used_.begin(), slot_used_.end(), [](bool used) { return used; });
  const bool fits = buffer_.defined() && numel <= slot_numel_ && buffer_.scalar_type() == like.dtype().toScalarType() &&
                    buffer_.device() == like.device();
  if (!fits) {
    if (!idle)
      throw std::runtime_error("activation_checkpointing.contiguous_memory_optimization: a checkpointed activation of " + describe(numel, like) +
                               " does not fit the buffer's slots of " + describe(slot_numel_, buffer_.options()) +
                               ", sized at the first checkpoint, while other slots are in use: the checkpointed inputs of one "
                               "forward pass must be alike");
    buffer_ = at::empty({int64_t(options_.slots) * numel}, like);
    slot_numel_ = numel;
    slot_used_.assign(size_t(options_.slots), false);
  }
  const auto free = std::find(slot_used_.begin(), slot_used_.end(), false);
  if (free == slot_used_.end())
    throw std::runtime_error("activation_checkpointing.contiguous_memory_optimization: all " + std::to_string(options_.slots) +
                             " slots of the buffer hold checkpointed activations that no backward has used yet; more inputs are "
                             "checkpointed before a backward than activation_checkpointing.number_checkpoints (" +
                             std::to_string(options_.slots) + ") allows: raise it, or leave it null to count the checkpointed blocks");
  *free = true;
  const int slot = int(free - slot_used_.begin());
  return {buffer_.narrow(0, slot * slot_numel_, numel), slot};
}

void ActivationStore::give_back(int slot, int64_t numel) {
  held_elements_ -= numel;
  if (slot < 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  slot_used_[size_t(slot)] = false;
}

at::Tensor ActivationStore::buffer() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return buffer_;
}

}  // namespace dtrain
