// How NvmeOptimizer cuts the state it streams into sub-groups, and how many of them it keeps in
// memory at once: header-only, so that the memory estimate (tools/estimate) sizes the buffers with
// the optimizer's own rule without linking the optimizer.
#pragma once
#include <algorithm>
#include <cstdint>

namespace dtrain {

// The most buffer sets a step uses: one being updated, one being read, one being written back.
constexpr int64_t kNvmeBufferSets = 3;

// The share of the state the buffers hold when zero_optimization.sub_group_size is "auto", and the
// smallest sub-group that rule makes: reads and writes of 4 MiB (fp32) per file and more keep the
// disk streaming, and a state under 48 × that is small enough not to matter (docs/decisions.md,
// "Sub-groups when sub_group_size is unset").
constexpr int64_t kAutoSubGroupBufferShare = 16;
constexpr int64_t kMinAutoSubGroup = int64_t(1) << 20;

// zero_optimization.sub_group_size "auto" for a state of `numel` elements: sub-groups so small that
// the buffer sets a step keeps hold 1/kAutoSubGroupBufferShare of what it streams, at least
// kMinAutoSubGroup elements, at most the whole state. DeepSpeed's default of 1e9 makes the buffers
// as large as the state, and then offloading saves nothing.
inline int64_t sub_group_size_for(int64_t numel) {
  const int64_t groups = kNvmeBufferSets * kAutoSubGroupBufferShare;  // sub-groups, of which kNvmeBufferSets are resident
  return std::max<int64_t>(1, std::min(numel, std::max(kMinAutoSubGroup, (numel + groups - 1) / groups)));
}

// The sub-group a state of `numel` elements is streamed in: zero_optimization.sub_group_size when
// set (`configured` > 0), else sub_group_size_for.
inline int64_t sub_group_numel(int64_t numel, int64_t configured) {
  return configured > 0 ? std::max<int64_t>(1, std::min(configured, numel)) : sub_group_size_for(numel);
}

// The buffer sets a step of `numel` elements in sub-groups of `sub_group` keeps: one per sub-group, at most kNvmeBufferSets.
inline int64_t nvme_buffer_sets(int64_t numel, int64_t sub_group) { return std::min((numel + sub_group - 1) / sub_group, kNvmeBufferSets); }

}  // namespace dtrain
