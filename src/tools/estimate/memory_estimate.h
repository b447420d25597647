// How much memory one training rank takes, from its layout alone (memory_layout.h): a pure function,
// so that `dtrain estimate` prints it, every run compares it with what it measured, and a planner
// can call it for each candidate layout. Each term is one buffer or one class of buffers dtrain
// allocates, with the formula that gives its bytes (model_states.h, activation_memory.h,
// step_peak.h say where each comes from). The estimate is of the peak during a training step:
// the state a rank keeps throughout, plus what is alive at the step's busiest moment.
#pragma once
#include <string>
#include <vector>

#include "tools/estimate/memory_layout.h"

namespace dtrain {

// What a term is, for the table's grouping and for a planner's questions ("how much is activations").
enum class MemoryKind { Parameters, Gradients, OptimizerStates, Activations, Communication, Workspaces, Runtime };
// Where its bytes are: the memory the rank computes in (GPU memory; host memory on the CPU build),
// the host (offloaded state on a GPU run), or a file (NVMe offload).
enum class MemoryPlace { Device, Host, Nvme };

struct MemoryTerm {
  std::string name;     // "optimizer states (AdamW moments, sharded over dp 4)"
  MemoryKind kind;
  MemoryPlace place = MemoryPlace::Device;
  double bytes = 0;
  std::string formula;  // "8Ψ/dp = 8 × 124439808 / 4"
};

// One rank's estimate. Ranks that hold the same things share one: every rank without pp, each
// pipeline stage's ranks with it.
struct RankEstimate {
  std::string ranks;      // which ranks this is: "every rank"
  int count = 1;          // how many ranks
  int stage = 0;          // the pipeline stage they run (0 without pp)
  std::string peak_moment;  // when the step peaks: "the last block's backward"
  std::vector<MemoryTerm> terms;

  double bytes(MemoryPlace place) const;
  // The device's tensors: what a run measures (tensor_memory.h), runtime excluded.
  double tensor_bytes() const;
  // Everything in device memory, the runtime included: what must fit.
  double device_bytes() const { return bytes(MemoryPlace::Device); }
  // The largest device term besides the runtime: what a layout could shrink.
  const MemoryTerm& largest() const;
};

struct MemoryEstimate {
  // Non-empty when the layout holds something the formulas do not cover: "no estimate for train.freeze=..."
  // (then `ranks` is empty). Never a silently wrong number.
  std::string no_estimate;
  std::vector<RankEstimate> ranks;

  bool covered() const { return no_estimate.empty(); }
  // The rank with the most device memory.
  const RankEstimate& most_loaded() const;
  // The ranks of pipeline stage `stage` (every rank without pp).
  const RankEstimate& of_stage(int stage) const;
};

MemoryEstimate estimate_memory(const MemoryLayout& layout);

// What the layout holds that the estimate does not model ("tp 2", "train.freeze"), "" when covered.
std::string uncovered_layout(const MemoryLayout& layout);

// The layouts the estimate covers, one line each, for `dtrain estimate --help`, the docs and the test
// that keeps them in step with the measured comparison.
const std::vector<std::string>& covered_layouts();

std::string memory_kind_name(MemoryKind kind);
std::string memory_place_name(MemoryPlace place);

}  // namespace dtrain
