#include "model/embedding.h"

namespace dtrain {

EmbeddingImpl::EmbeddingImpl(int64_t rows, int64_t dim) { weight = register_parameter("weight", at::empty({rows, dim})); }

}  // namespace dtrain
