#include "train/activation_store_setup.h"

namespace dtrain {

namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ",") + std::to_string(r);
  return text;
}

}  // namespace

std::vector<std::string> apply_activation_store(Transformer& model, const TrainConfig& c, const DeviceMesh& mesh, const at::Device& device) {
  const ActivationStoreOptions& s = c.activation_checkpointing.store;
  std::vector<std::string> lines;
  const std::string key = "activation_checkpointing.";
  const int tp = mesh.size("tp");
  if (s.partition) {
    // A block input is the same on every tp rank only without sequence parallelism: under it each rank
    // holds its own 1/tp of the sequence, which a gather of pieces cut from different tensors would mix.
    if (tp == 1) {
      lines.push_back(key + "partition_activations: tp is 1, nothing to partition");
    } else if (c.sequence_parallel) {
      lines.push_back(key + "partition_activations: under parallel.sequence_parallel a block's input already is this rank's 1/" +
                      std::to_string(tp) + " of the sequence, kept as it is; nothing more to partition");
    } else {
      const auto group = mesh.group("tp");
      model->set_activation_partition_group(group);
      lines.push_back(key + "partition_activations: each checkpointed block input kept as 1/" + std::to_string(tp) +
                      " per rank over the tp group (global ranks " + rank_list(group->ranks()) + "), all-gathered before its recomputation");
    }
  }
  if (s.host_memory)
    lines.push_back(device.is_cpu() ? key + "cpu_checkpointing: this run computes on the CPU, so checkpointed activations already are in host "
                                            "memory; nothing moves"
                                    : key + "cpu_checkpointing: checkpointed block inputs kept in pinned host memory, copied back to the " +
                                          device.str() + " for their recomputation");
  if (s.contiguous) {
    int checkpointed = 0;
    for (const BlockRange& r : model->parts().chunks) checkpointed += c.activation_checkpointing.whole_blocks(r.first, r.end);
    lines.push_back(key + "contiguous_memory_optimization: checkpointed block inputs copied into one buffer " +
                    (s.host_memory && !device.is_cpu() ? "in host memory" : "on the " + device.str()) + " of " + std::to_string(s.slots) +
                    " slots (" + key + "number_checkpoints; this model checkpoints " +
                    std::to_string(checkpointed) +
                    " block inputs per forward pass), allocated at the first checkpoint");
  }
  return lines;
}

}  // namespace dtrain
