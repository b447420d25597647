// Sharded checkpoints (shared/design.md §8): every rank writes the pieces it writes into its own
// safetensors file, shard-<rank>.safetensors, and rank 0 then writes index.json, which maps every
// global tensor (its name, shape and dtype) to the chunks that hold it: which file, which piece of
// the tensor and which bytes. A chunk is a placement's piece (parallel/placement.h): a box of the
// global tensor, optionally narrowed to a flat range of the box's elements — a tensor-parallel slice,
// ZeRO's flat range of the whole tensor, or ZeRO's flat range of a tensor-parallel slice — so any
// layout's pieces can be described, and a reader asks for any piece of any tensor and gets exactly
// the chunks that overlap it. That is what makes a checkpoint saved under one layout (dp 4 at stage
// 3) load under any other (one rank, no ZeRO): each rank reads only what it now holds.
//
// index.json is at version 2. Version 1 (dtrain before boxes) stored only flat ranges of the whole
// flattened tensor, which are whole-tensor boxes with a flat range: the reader reads both.
//
// The index is built from the shard files' own headers, so it cannot disagree with them, and it is
// refused unless every global tensor is covered exactly once. A reader checks both again: an index
// that disagrees with a header (edited, with its checksum rewritten to match) is damaged.
#pragma once
#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "parallel/placement.h"

namespace dtrain {

// `piece` of the global tensor `tensor`: its numel(piece) elements in the piece's own order.
struct TensorChunk {
  std::string tensor;
  LocalPiece piece;
  at::Tensor data;  // contiguous elements, any shape, any device
};

// How the layout that saved a tensor cut it over one mesh dim of more than one rank ("sharded on dim
// 0 over tp's 2 ranks"): for a person or a tool reading the index. Loading never needs it, since the
// chunks say which elements each holds, whatever layout wrote them.
struct SavedPlacement {
  std::string mesh_dim;
  int ranks = 1;
  Placement placement;
};

// What a global tensor is, whoever holds its pieces.
struct GlobalTensor {
  std::vector<int64_t> shape;
  at::ScalarType dtype = at::kFloat;
  std::vector<SavedPlacement> placements;  // in the order they apply; none for a tensor one rank held whole
  int64_t numel() const;
};

constexpr const char* kCheckpointIndexFile = "index.json";
// The version of index.json this dtrain writes; it reads this one and version 1.
constexpr int kCheckpointIndexVersion = 2;

// The file a rank writes its chunks into: "shard-00003.safetensors".
std::string shard_file_name(int rank);

// A chunk's name in its shard file: "model/wte.weight@[0:256,0:192]", the box per dim as
// begin:end, followed by "[100:200]" for a flat range of the box. Its shape there is the box's when
// it holds the whole box (so a tool reads such a chunk as the tensor slice it is), one dim otherwise.
std::string chunk_key(const std::string& tensor, const LocalPiece& piece);

// Writes (and fsyncs) this rank's chunks into dir/shard_file_name(rank); nothing when it has none.
void write_shard_file(const std::string& dir, int rank, const std::vector<TensorChunk>& chunks);

// Rank 0, after every rank's write_shard_file: reads the shard files' headers and writes the index of
// `tensors` (with their placements) and `metadata` (free-form JSON, e.g. the model's config). Throws
// naming the tensor whose elements no file holds, or holds twice, and the chunk whose dtype, place or
// size does not fit it.
void write_checkpoint_index(const std::string& dir, const std::map<std::string, GlobalTensor>& tensors,
                            const nlohmann::json& metadata);

// Reads a sharded checkpoint's index (checked whole when opened: every tensor covered exactly once by
// chunks that its files' headers hold at the bytes, dtype and size the index says) and fetches pieces
// of its tensors with positioned reads of just the bytes they need.
class ShardedCheckpointReader {
 public:
  explicit ShardedCheckpointReader(const std::string& dir);
  ~ShardedCheckpointReader();

  int version() const { return version_; }  // of index.json: 1 or 2
  const std::string& index_path() const { return index_path_; }
  const std::map<std::string, GlobalTensor>& tensors() const { return tensors_; }
  const nlohmann::json& metadata() const { return metadata_; }
  // The tensor called `name`; throws naming the index when it has none.
  const GlobalTensor& tensor(const std::string& name) const;

  // Fills `out` (numel(piece) elements, contiguous, any device) with `piece` of `name`, in the piece's
  // order, from the chunks that overlap it alone. Throws naming the index when the piece does not
  // lie inside the tensor or its chunks miss an element of it (checked before anything is read).
  void read(const std::string& name, const LocalPiece& piece, at::Tensor out);
  // Elements [offset, offset + out.numel()) of the flattened tensor into `out` (one dimension).
  void read(const std::string& name, int64_t offset, at::Tensor out);
  // The whole tensor, shaped, on the CPU.
  at::Tensor read(const std::string& name);

 private:
  struct Chunk {
    std::string file, key;  // key: its name in `file`'s header
    LocalPiece piece;
    std::vector<int64_t> stored_shape;  // its shape in the header
    uint64_t begin = 0, end = 0;        // its bytes in `file`
  };
  // A tensor's chunks that are pieces of one box, by flat range: they are disjoint (each element is
  // held once), so their ranges' ends are sorted too, and a binary search finds the first that
  // reaches a given element of the box.
  struct BoxChunks {
    Box box;
    std::vector<Chunk> chunks;
  };
  void add_tensor(const std::string& name, const nlohmann::json& spec);
  Chunk parse_chunk(const std::string& name, const GlobalTensor& global, const nlohmann::json& c) const;
  // The chunks that hold elements of `piece`.
  std::vector<const Chunk*> overlapping(const std::string& name, const LocalPiece& piece) const;
  int descriptor(const std::string& file);
  // Every chunk where its file's header has it, with the same dtype, shape and bytes; throws naming
  // the index, the file and the tensor.
  void check_chunks_against_files() const;

  std::string dir_, index_path_;
  int version_ = kCheckpointIndexVersion;
  std::map<std::string, GlobalTensor> tensors_;
  std::map<std::string, std::vector<BoxChunks>> chunks_;  // per tensor
  nlohmann::json metadata_;
  std::map<std::string, int> open_;  // file name -> descriptor
};

}  // namespace dtrain
