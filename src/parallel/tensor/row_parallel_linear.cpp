#include "parallel/tensor/row_parallel_linear.h"

#include "comm/mappings.h"

namespace dtrain {

void RowParallelLinear::apply_to(LinearImpl& layer) const {
  if (sequence_parallel_) {
    layer.set_output_reduction([g = group_](const at::Tensor& partial) { return reduce_scatter_to_sequence(partial, g); });
    layer.set_bias_view([g = group_](const at::Tensor& bias) { return copy_to_group(bias, g); });
  } else {
    layer.set_output_reduction([g = group_](const at::Tensor& partial) { return reduce_from_group(partial, g); });
  }
}

}  // namespace dtrain
