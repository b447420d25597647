#include "tools/estimate/offload_states.h"

#include <string>

#include "parallel/zero/nvme_sub_groups.h"

namespace dtrain {

namespace {

MemoryPlace place_of(const std::string& device, const MemoryLayout& l) {
  if (device == "nvme") return MemoryPlace::Nvme;
  return device == "cpu" && !l.device_is_cpu ? MemoryPlace::Host : MemoryPlace::Device;
}

// Where what lives "in memory" beside an offloaded state is: the host on a GPU, the device on the CPU build.
MemoryPlace host_memory(const MemoryLayout& l) { return l.device_is_cpu ? MemoryPlace::Device : MemoryPlace::Host; }

std::string text(int64_t n) { return std::to_string(n); }

}  // namespace

MemoryPlace optimizer_state_place(const MemoryLayout& l) { return l.zero_stage >= 1 ? place_of(l.offload_optimizer, l) : MemoryPlace::Device; }

MemoryPlace parameter_shard_place(const MemoryLayout& l) { return l.zero_stage == 3 ? place_of(l.offload_param, l) : MemoryPlace::Device; }

std::vector<MemoryTerm> offload_buffer_terms(const MemoryLayout& l, const ParameterCounts& c) {
  std::vector<MemoryTerm> terms;
  if (l.zero_stage == 0) return terms;
  const int64_t shard = c.sharded_numel(l.dp_shard);
  const bool params_streamed = optimizer_state_place(l) == MemoryPlace::Nvme && parameter_shard_place(l) == MemoryPlace::Nvme;
  if (optimizer_state_place(l) == MemoryPlace::Nvme) {
    // NvmeOptimizer: per buffer set (one updating, one reading, one writing back; fewer when the
    // state has fewer sub-groups), one fp32 sub-group per state tensor, and one of the parameter
    // shard when it is streamed with the state. Under "auto" three sets hold 1/16 of the streamed
    // state (1/48 each), or the whole state when it is under one 2^20-element sub-group.
    const int64_t sub = sub_group_numel(shard, l.sub_group_size), sets = nvme_buffer_sets(shard, sub);
    const int64_t files = int64_t(l.optimizer_bytes / 4) + (params_streamed ? 1 : 0);
    const std::string sized = l.sub_group_size > 0 ? "sub_group_size" : "auto: min(Ψ/dp, max(2^20, Ψ/dp / 48))";
    terms.push_back({"NVMe offload: streaming buffers (" + text(sets) + " set(s) of " + text(files) + " sub-group(s) of " + text(sub) + ")",
                     MemoryKind::OptimizerStates, host_memory(l), 4.0 * double(sets * files * sub),
                     "4 × sets × files × sub-group = 4 × " + text(sets) + " × " + text(files) + " × " + text(sub) + " (" + sized + ")"});
  }
  // HostOffloadOptimizer on a GPU: page-locked copies of the shard's gradients, and of its
  // parameters unless the shard is on the host or NVMe already, which the update reads on the CPU.
  if (!l.device_is_cpu && l.offload_optimizer != "none") {
    const bool params_staged = parameter_shard_place(l) == MemoryPlace::Device;
    const int64_t staged = (params_staged ? 2 : 1) * shard;
    terms.push_back({std::string("ZeRO-Offload: pinned staging of the gradient") + (params_staged ? " and parameter" : "") + " shard",
                     MemoryKind::Gradients, MemoryPlace::Host, 4.0 * double(staged), params_staged ? "8Ψ/dp" : "4Ψ/dp"});
  }
  return terms;
}

std::vector<MemoryTerm> offloaded_piece_terms(const MemoryLayout& l, const ParameterCounts& c, int i) {
  if (parameter_shard_place(l) == MemoryPlace::Device || i < 1) return {};
  // A gather sends this rank's piece of the unit (fp32, padded to 1/dp), read from the shard's file
  // or copied from the host onto the device, until the gather completes: block i-1's while block i
  // runs its backward. From NVMe the piece of block i-2 is being read ahead into a buffer of its own.
  const double piece = 4.0 * double(shard_numel(c.block, l.dp_shard));
  std::vector<MemoryTerm> terms = {{"ZeRO-3 offloaded shard: the piece of the block before it, being gathered", MemoryKind::Communication,
                                    MemoryPlace::Device, piece, "4 × ceil(block / dp)"}};
  if (l.offload_param == "nvme" && i >= 2)
    terms.push_back({"ZeRO-3 offloaded shard: the piece of the block two before it, read ahead", MemoryKind::Communication, host_memory(l), piece,
                     "4 × ceil(block / dp)"});
  return terms;
}

}  // namespace dtrain
