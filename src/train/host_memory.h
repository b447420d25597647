// How the training process keeps host memory. glibc's malloc hands large freed blocks straight back
// to the kernel (they are mmapped above its adaptive threshold, and the heap top is trimmed past
// 128 KiB), so every step faults its activations back in and the kernel zeroes each page again.
// keep_freed_host_memory() tells glibc to keep what it frees: blocks up to 32 MiB (glibc's ceiling)
// come from the heap, and the heap is never trimmed. Peak RSS stays what the step needs; it is just
// not given back between steps. docs/decisions.md has the measurements behind this choice.
// DTRAIN_GLIBC_MALLOC_DEFAULTS=1 leaves glibc as it ships (for comparisons), and so does any
// MALLOC_*_ variable the user set.
#pragma once
#include <cstdint>
#include <string>

namespace dtrain {

// Returns a line saying what was set, or why nothing was. Where the CPU tensors are tracked
// (tensor_memory.h) their large blocks also go to a HostBlockCache instead of the heap
// (host_block_cache.h), unless DTRAIN_HOST_BLOCK_CACHE=0.
std::string keep_freed_host_memory();

// While setting up, blocks of 1 MiB and more are mapped on their own rather than carved from the
// heap (after keep_freed_host_memory(); nothing otherwise). Setting up builds and frees several
// times the model's size (the parameters as first created, ZeRO-3's whole units): from the heap,
// those frees leave holes hundreds of MiB long, which malloc then serves the steps' large buffers
// from (a block of any size comes from a free heap chunk before a new mapping) and, keeping what it
// frees, leaves resident in a different place each step. Mapped, they leave memory when freed.
// release_freed_host_memory() ends it.
void map_large_blocks_while_setting_up();

// Gives the kernel back the free pages malloc holds (malloc_trim) and the tensor blocks the block
// cache keeps: once, when setting up is over.
// What building the model freed — the parameters as first created, before they moved into flat
// buffers or shards, and ZeRO-3's whole units — would otherwise stay resident for the whole run
// under keep_freed_host_memory(), beyond what any step needs. Returns by how much resident memory fell.
int64_t release_freed_host_memory();

// The process's peak resident bytes from now on (Linux's VmHWM, reset through /proc/self/clear_refs):
// the training steps' own peak RSS, without what setting up touched before them. Returns false
// where the kernel refuses the reset; peak_resident_bytes() then keeps counting from the start.
bool reset_peak_resident();

// The process's peak resident bytes (VmHWM) since it started or since reset_peak_resident().
int64_t peak_resident_bytes();

}  // namespace dtrain
