// Host copies of a rank's state, taken at the step an asynchronous save starts, so the step's
// tensors are free to change while the copies are written out. The buffers are kept from one save to
// the next (a save of the same state needs the same ones, and pinned memory is slow to allocate);
// a source on an accelerator is copied into pinned host memory, which the copy engine reads at full
// speed, a source on the CPU into ordinary memory.
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <vector>

namespace dtrain {

class HostCopies {
 public:
  // Starts a new set of copies: the buffers of the previous set are reused in the order asked for.
  // The previous set's copies must no longer be read (its save has ended).
  void begin();
  // A host copy of `source` as it is now, its values in a buffer of this set. The same tensor asked
  // twice in one set (views of one flat buffer) is copied once.
  at::Tensor copy(const at::Tensor& source);
  // Bytes held in buffers.
  int64_t bytes() const;

 private:
  std::vector<at::Tensor> buffers_;                        // by the order in which copy() asked for them
  size_t used_ = 0;                                        // buffers of the present set
  std::map<const c10::TensorImpl*, at::Tensor> copied_;  // the present set's copies by source
};

}  // namespace dtrain
