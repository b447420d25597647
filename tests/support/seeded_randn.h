// Normal samples from a generator of their own, so that a test's inputs do not depend on what ran
// before it in the same process.
#pragma once
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstdint>

namespace dtrain::test {

inline at::Tensor seeded_randn(at::IntArrayRef shape, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, gen);
}

}  // namespace dtrain::test
