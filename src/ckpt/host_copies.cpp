#include "ckpt/host_copies.h"

namespace dtrain {

void HostCopies::begin() {
  used_ = 0;
  copied_.clear();
}

at::Tensor HostCopies::copy(const at::Tensor& source) {
  if (auto done = copied_.find(source.unsafeGetTensorImpl()); done != copied_.end()) return done->second;
  if (used_ == buffers_.size()) buffers_.emplace_back();
  at::Tensor& buffer = buffers_[used_++];
  if (!buffer.defined() || buffer.sizes() != source.sizes() || buffer.scalar_type() != source.scalar_type())
    buffer = at::empty(source.sizes(), source.options().device(at::kCPU).pinned_memory(!source.device().is_cpu()));
  // A blocking copy: the background thread reads the buffer next, and on an accelerator the copy is
  // ordered after the optimizer step's kernels on the same stream.
  buffer.copy_(source.detach());
  copied_[source.unsafeGetTensorImpl()] = buffer;
  return buffer;
}

int64_t HostCopies::bytes() const {
  int64_t total = 0;
  for (const at::Tensor& b : buffers_) total += b.defined() ? int64_t(b.nbytes()) : 0;
  return total;
}

}  // namespace dtrain
