// ZeRO-3 with the output head tied to the token embedding: the token table's gradient arrives in two
// contributions, the head's (dense, the table's size) first and the lookup's last. As ATen computes
// it, the lookup's is dense too, a second table-sized buffer (147 MiB on GPT-2) alive with the
// head's until autograd sums them: with the whole unit gathered around it, the largest transient
// of the step. Looked up with a sparse gradient instead (only the rows of the tokens seen), the sum
// is an in-place add into the head's buffer, which then becomes the gradient the reduce-scatter
// reads: one table-sized gradient, as the parameter has one. The values are the dense path's, each
// row summed over the same tokens.
#pragma once
#include <torch/nn/module.h>

namespace dtrain {

// Sets the lookup of `model`'s token embedding ("wte") to at::embedding with a sparse gradient.
// Only for a model holding both the embedding and the head tied to it, its table whole on each rank
// (no tensor parallelism): the lookup's gradient alone would leave a sparse gradient no reduction reads.
void look_up_tokens_with_sparse_gradient(torch::nn::Module& model);

}  // namespace dtrain
