// Reads a Hugging Face GPT-2 or Llama checkpoint directory (config.json with the weights in
// model.safetensors, or in the shards model.safetensors.index.json names) as dtrain's parameters:
// any piece of any parameter, read with positioned reads of the rows that hold it, so each rank of
// any layout reads only the slices it holds (a tensor-parallel slice, a ZeRO flat range).
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "ckpt/safetensors.h"
#include "ckpt/training_checkpoint.h"
#include "hf/hf_config.h"
#include "hf/hf_tensor_map.h"
#include "parallel/placement.h"

namespace dtrain {

constexpr const char* kHfWeightsFile = "model.safetensors";
constexpr const char* kHfWeightsIndexFile = "model.safetensors.index.json";

class HfCheckpointReader {
 public:
  // Opens `dir` for a run of the model `run` (its shape read from this config.json; its seq_len may
  // be shorter than GPT-2's position table). Everything is checked before anything is read, each
  // failure a std::runtime_error naming the file: config.json (hf_config.h), the weights' files (a
  // shard the index names that does not exist), and every tensor the model needs (stored, in the
  // file the index says, with the shape the config gives and a floating-point dtype).
  HfCheckpointReader(const std::string& dir, const TransformerConfig& run);
  ~HfCheckpointReader();
  HfCheckpointReader(const HfCheckpointReader&) = delete;
  HfCheckpointReader& operator=(const HfCheckpointReader&) = delete;

  const HfModelShape& shape() const { return shape_; }
  // Fills `out` (numel(piece) elements, contiguous, any device and floating dtype) with `piece` of
  // dtrain's parameter `name`, converted from the stored dtype.
  void read(const std::string& name, const LocalPiece& piece, at::Tensor out);

 private:
  struct Stored {
    std::string file;
    SafetensorsEntry entry;
  };
  // `box` of the stored tensor `t`, shaped as the box, in the stored dtype.
  at::Tensor read_box(const HfTensor& t, const Box& box);
  int descriptor(const std::string& file);

  std::string dir_;
  TransformerConfig run_;
  HfModelShape shape_;
  std::vector<HfTensor> tensors_;
  std::map<std::string, Stored> stored_;  // by the HfTensor's name
  std::map<std::string, int> open_;       // file -> descriptor
};

// Reads every piece of `parameters` (a rank's, as a checkpoint's load fills them) from `hf`.
void load_hf_parameters(HfCheckpointReader& hf, const std::vector<HeldParameter>& parameters);

}  // namespace dtrain
