// Initialisation by name: each parameter's initial values depend on the run's seed and the
// parameter's global name alone (blocks.3.q_proj.weight), never on which other parameters a model
// holds or the order it creates them in. A model holding some blocks, a pipeline stage, or a rank
// that keeps a slice of a weight (drawn on the full shape, then sliced) therefore starts from the
// weights the whole single-rank model has. The scheme is GPT-2's: normal with std 0.02, the residual
// projections (o_proj, down_proj) 0.02/sqrt(2·n_layer), biases zero, norm weights one.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <string>

namespace dtrain {

// The seed of the generator that draws parameter `name`: a hash of the run's seed and the name
// (FNV-1a of the name, mixed with the seed by SplitMix64), the same on every platform.
uint64_t parameter_seed(uint64_t seed, const std::string& name);

// Writes the initial values of parameter `name` of a model `n_layer` blocks deep into `param`,
// which has the parameter's full shape.
void initialise_parameter(const std::string& name, at::Tensor& param, int n_layer, uint64_t seed);

}  // namespace dtrain
