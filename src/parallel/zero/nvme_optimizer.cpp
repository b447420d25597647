#include "parallel/zero/nvme_optimizer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "optim/optimizer_state.h"
#include "common/unnamed_file.h"

namespace dtrain {

NvmeOptimizer::NvmeOptimizer(std::unique_ptr<ElementwiseRule> rule, int64_t numel, at::TensorOptions options,
                             NvmeOffloadOptions offload)
    : rule_(std::move(rule)),
      names_(rule_->state_names()),
      numel_(numel),
      sub_group_(std::max<int64_t>(1, std::min(offload.sub_group_size, numel))),
      groups_((numel + sub_group_ - 1) / sub_group_),
      options_(options),
      path_(offload.path),
      io_(std::make_unique<AsyncFileIo>()) {
  buffers_.resize(size_t(nvme_buffer_sets(numel_, sub_group_)));
  for (auto& set : buffers_)
    for (size_t i = 0; i < names_.size(); ++i) set.push_back(at::empty({sub_group_}, options_));
  try {
    for (size_t i = 0; i < names_.size(); ++i) files_.push_back(make_unnamed_file(path_, numel_ * int64_t(options_.dtype().itemsize())));
  } catch (...) {
    for (int fd : files_) ::close(fd);
    throw;
  }
}

NvmeOptimizer::~NvmeOptimizer() {
  io_.reset();  // every transfer finished before the files close
  for (int fd : files_) ::close(fd);
  if (params_fd_ >= 0) ::close(params_fd_);
}

void NvmeOptimizer::stream_parameters_from(int fd, const std::string& name) {
  TORCH_CHECK(options_.dtype() == at::kFloat, "NvmeOptimizer: streamed parameters are fp32, like the state");
  params_fd_ = ::dup(fd);  // its own: the shard's owner may close its descriptor first
  if (params_fd_ < 0) throw std::runtime_error("cannot duplicate the descriptor of " + name + ": " + std::strerror(errno));
  params_name_ = name;
  for (auto& set : buffers_) set.push_back(at::empty({sub_group_}, options_));
}

std::vector<uint64_t> NvmeOptimizer::transfer(bool write, int64_t group, int set) const {
  std::vector<uint64_t> tickets;
  const size_t item = options_.dtype().itemsize();
  for (size_t i = 0; i < streamed_files(); ++i) {
    void* data = buffers_[size_t(set)][i].data_ptr();
    const size_t bytes = size_t(group_numel(group)) * item;
    const off_t at = off_t(group_begin(group)) * off_t(item);
    tickets.push_back(write ? io_->write(file(i), file_name(i), data, bytes, at) : io_->read(file(i), file_name(i), data, bytes, at));
  }
  return tickets;
}

void NvmeOptimizer::step_pieces(const std::vector<StatePiece>& pieces, double lr, const GradUse& use) {
  ++steps_;
  const int sets = int(buffers_.size());
  std::vector<std::vector<uint64_t>> writing(static_cast<size_t>(sets));
  std::vector<uint64_t> reading = transfer(false, 0, 0);
  for (int64_t g = 0; g < groups_; ++g) {
    const int set = int(g % sets);
    for (uint64_t t : reading) io_->wait(t);
    if (g + 1 < groups_) {  // the next sub-group comes in while this one computes
      const int next = int((g + 1) % sets);
      for (uint64_t t : writing[size_t(next)]) io_->wait(t);
      writing[size_t(next)].clear();
      reading = transfer(false, g + 1, next);
    }
    const int64_t begin = group_begin(g), n = group_numel(g);
    const auto& buffers = buffers_[size_t(set)];
    std::vector<StatePiece> mine;
    for (const auto& p : pieces) {
      const int64_t from = std::max(p.state_offset, begin), to = std::min(p.state_offset + p.params.numel(), begin + n);
      if (from >= to) continue;
      const int64_t at = from - p.state_offset, len = to - from;
      at::Tensor params = params_fd_ >= 0 ? buffers.back().narrow(0, from - begin, len) : p.params.narrow(0, at, len);
      mine.push_back({params, p.grads.narrow(0, at, len), spans_within(p.decay, at, len), from - begin});
    }
    std::vector<at::Tensor> state;
    for (size_t i = 0; i < names_.size(); ++i) state.push_back(buffers[i].narrow(0, 0, n));
    rule_->update(mine, state, steps_, lr, use);
    writing[size_t(set)] = transfer(true, g, set);
  }
  io_->wait_all();
}

at::Tensor NvmeOptimizer::map_state(size_t i) const {
  const size_t bytes = size_t(numel_) * options_.dtype().itemsize();
  if (bytes == 0) return at::empty({0}, options_);
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, files_[i], 0);
  if (data == MAP_FAILED) throw std::runtime_error("cannot map " + file_name(i) + ": " + std::strerror(errno));
  return at::from_blob(data, {numel_}, [bytes](void* p) { ::munmap(p, bytes); }, options_);
}

std::map<std::string, at::Tensor> NvmeOptimizer::state() const {
  std::map<std::string, at::Tensor> out = {{"step", at::scalar_tensor(steps_, at::kLong)}};
  handed_out_.clear();
  for (size_t i = 0; i < names_.size(); ++i) {
    out[names_[i]] = map_state(i);
    handed_out_.push_back(out[names_[i]].storage().getWeakStorageImpl());
  }
  return out;
}

bool NvmeOptimizer::is_state_mapping(size_t i, const at::Tensor& t) const {
  // A weak reference: a mapping since unmapped cannot be mistaken for one that reuses its address.
  if (i >= handed_out_.size()) return false;
  const auto mapping = handed_out_[i].lock();
  return mapping && mapping.get() == t.storage().unsafeGetStorageImpl() && t.storage_offset() == 0 && t.numel() == numel_;
}

std::vector<FlatOptimizer::StateEntry> NvmeOptimizer::state_entries() const {
  std::vector<StateEntry> out = {{"step", at::kLong, false}};
  for (const auto& name : names_) out.push_back({name, options_.dtype().toScalarType(), true});
  return out;
}

void NvmeOptimizer::load_state(const std::map<std::string, at::Tensor>& state) {
  for (size_t i = 0; i < names_.size(); ++i) {
    const auto it = state.find(names_[i]);
    if (it != state.end() && is_state_mapping(i, it->second)) continue;  // written through: the file holds it
    at::Tensor t = map_state(i);
    restore_state_tensor(state, names_[i], t);
  }
  steps_ = state_step(state);
}

int64_t NvmeOptimizer::resident_bytes() const {
  int64_t bytes = rule_->scratch_bytes();
  for (const auto& set : buffers_)
    for (const auto& t : set) bytes += int64_t(t.nbytes());
  return bytes;
}

}  // namespace dtrain
