// Sharded checkpoints (shared/design.md §8): every rank writes the pieces it owns into its own
// safetensors file, shard-<rank>.safetensors, and rank 0 then writes index.json, which maps every
// global tensor (its name, shape and dtype) to the chunks that hold it: which file, which elements
// and which bytes. A chunk is a run of elements of the tensor flattened in row-major order — the
// "flat range" placement ZeRO and FSDP shard by — so any layout's pieces can be described, and a
// reader asks for any range of any tensor and gets exactly the chunks that overlap it. That is what
// makes a checkpoint saved under one layout (dp 4 at stage 3) load under any other (one rank, no
// ZeRO): each rank reads only what it now holds.
//
// The index is built from the shard files' own headers, so it cannot disagree with them, and it is
// refused unless every global tensor is covered exactly once. A reader checks both again: an index
// that disagrees with a header (edited, with its checksum rewritten to match) is damaged.
#pragma once
#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dtrain {

// Elements [offset, offset + data.numel()) of the flattened global tensor `tensor`.
struct TensorChunk {
  std::string tensor;
  int64_t offset = 0;
  at::Tensor data;  // one dimension; any device
};

// What a global tensor is, whoever holds its pieces.
struct GlobalTensor {
  std::vector<int64_t> shape;
  at::ScalarType dtype = at::kFloat;
  int64_t numel() const;
};

constexpr const char* kCheckpointIndexFile = "index.json";

// The file a rank writes its chunks into: "shard-00003.safetensors".
std::string shard_file_name(int rank);

// Writes (and fsyncs) this rank's chunks into dir/shard_file_name(rank); nothing when it has none.
void write_shard_file(const std::string& dir, int rank, const std::vector<TensorChunk>& chunks);

// Rank 0, after every rank's write_shard_file: reads the shard files' headers and writes the index of
// `tensors` with `metadata` (free-form JSON, e.g. the model's config). Throws naming the tensor whose
// elements no file holds, or holds twice, and the chunk whose dtype or size does not fit it.
void write_checkpoint_index(const std::string& dir, const std::map<std::string, GlobalTensor>& tensors,
                            const nlohmann::json& metadata);

// Reads a sharded checkpoint's index (checked whole when opened: every tensor covered exactly once by
// chunks that its files' headers hold at the bytes, dtype and size the index says) and fetches ranges of its tensors with positioned reads of just the bytes
// they need.
class ShardedCheckpointReader {
 public:
  explicit ShardedCheckpointReader(const std::string& dir);
  ~ShardedCheckpointReader();

  const std::map<std::string, GlobalTensor>& tensors() const { return tensors_; }
  const nlohmann::json& metadata() const { return metadata_; }
  // The tensor called `name`; throws naming the index when it has none.
  const GlobalTensor& tensor(const std::string& name) const;

  // Fills `out` (one dimension, any device) with elements [offset, offset + out.numel()) of `name`.
  void read(const std::string& name, int64_t offset, at::Tensor out);
  // The whole tensor, shaped, on the CPU.
  at::Tensor read(const std::string& name);

 private:
  struct Chunk {
    std::string file;
    int64_t offset = 0, numel = 0;
    uint64_t begin = 0;  // byte offset of its first element in `file`
  };
  int descriptor(const std::string& file);
  // Every chunk where its file's header has it, with the same dtype, size and byte offset; throws
  // naming the index, the file and the tensor.
  void check_chunks_against_files() const;

  std::string dir_, index_path_;
  std::map<std::string, GlobalTensor> tensors_;
  std::map<std::string, std::vector<Chunk>> chunks_;  // per tensor, in element order
  nlohmann::json metadata_;
  std::map<std::string, int> open_;  // file name -> descriptor
};

}  // namespace dtrain
