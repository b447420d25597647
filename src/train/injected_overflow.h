// Fault injection for the fp16 tests: DTRAIN_INJECT_OVERFLOW holds entries "step:rank" separated by
// commas; the rank whose RANK matches scales that step's loss by infinity, so its gradients overflow
// as a too-large loss scale would make them. Unset, a call costs a getenv and one short string.
#pragma once
#include <cstdint>

namespace dtrain {

bool overflow_injected(int64_t step);

}  // namespace dtrain
