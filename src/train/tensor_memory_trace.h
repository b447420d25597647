// A debugging aid for the memory estimate: what is alive at a rank's peak of CPU tensor bytes. With
// DTRAIN_TENSOR_MEMORY_PEAKS=PREFIX in the environment (read once, when the counting allocator is
// installed), the counting allocator (tensor_memory.h) also records each live allocation with its
// size and a short backtrace, keeps a copy of them at each new peak, and at every peak reset and at
// the process's exit appends that window's peak to PREFIX.<pid>.txt: the live allocations, largest
// first, each with the frames that allocated it. Costly (a lock and a backtrace per allocation, a
// copy per new peak): for runs of a few steps on small models, never the default.
#pragma once
#include <cstddef>
#include <cstdint>

namespace dtrain::tensor_memory_trace {

// Whether the environment asks for the trace (read on the first call).
bool enabled();
// An allocation of `bytes` at `data` now alive, `live` the bytes alive with it; one freed.
void allocated(void* data, int64_t bytes, int64_t live);
void freed(void* data);
// The window's peak is written and a new window begins from what is alive now.
void reset(int64_t live);

}  // namespace dtrain::tensor_memory_trace
