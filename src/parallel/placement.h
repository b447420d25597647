// Placements (shared/design.md §8): the one description of which piece of each parameter, gradient
// and optimizer state a rank holds, whatever parallelism cut it. A parameter keeps its global
// identity (ParamSpec: its name in the unsharded model, global shape and dtype) and says, per mesh
// dim, how that dim's ranks share it: replicated, sharded along one tensor dim (tensor
// parallelism), sharded as flat ranges of its elements (ZeRO/FSDP), or held by some of the dim's
// ranks alone (pipeline stages: a block lives on one, a tied embedding on the first and the last). What a rank then holds is a LocalPiece: a box of the global tensor (an offset and a
// size per dim), optionally narrowed to a flat range of the box's elements in row-major order — the
// shape of Megatron's ShardedTensor with `flattened_range`. ZeRO over a tensor-parallel piece is a
// flat range of a box that is not contiguous in the global tensor; that is why both parts exist.
//
// Everything here is pure arithmetic on shapes: no tensors, no communication. Checkpoints (where a
// stored chunk is a LocalPiece too) and the trainer's state layout are built on it.
#pragma once
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dtrain {

struct Placement {
  enum class Kind { Replicate, Shard, FlatShard, Stages } kind = Kind::Replicate;
  int dim = -1;  // Shard: the tensor dim cut into parts, one per rank of the mesh dim (chunk_range)
  // Stages: the coordinates along the mesh dim that hold the tensor whole, increasing; the others
  // hold nothing of it, and the first writes it.
  std::vector<int> stages;

  static Placement replicate() { return {Kind::Replicate, -1, {}}; }
  static Placement shard(int dim) { return {Kind::Shard, dim, {}}; }
  static Placement flat_shard() { return {Kind::FlatShard, -1, {}}; }
  static Placement held_by(std::vector<int> stages) { return {Kind::Stages, -1, std::move(stages)}; }
};

// A tensor's global identity and how the mesh's dims share it. Placements apply in the list's order
// (outermost mesh dim first): each Shard narrows the box the previous ones left, each FlatShard the
// flat range; no Shard may follow a FlatShard (a flat range cannot be cut along a tensor dim). A mesh
// dim the list does not name changes neither the piece nor who writes it, so every dim the tensor is
// replicated over must be named; under pipeline parallelism every parameter names pp as Stages: the
// stages that hold it.
struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  at::ScalarType dtype = at::kFloat;
  std::vector<std::pair<std::string, Placement>> placements;  // per mesh dim name
};

// Placements that model parallelism gives parameters, by parameter name: per mesh dim it cuts the
// tensor over (tp: Shard), placed before data parallelism's, which shard what they leave.
using ModelPlacements = std::map<std::string, std::vector<std::pair<std::string, Placement>>>;

struct Box {
  std::vector<int64_t> offset, size;  // per tensor dim; a 0-d tensor's box has neither
};

struct LocalPiece {
  Box box;
  int64_t flat_begin = 0, flat_end = -1;  // elements of the box, row-major; -1: the whole box
};

// A rank's place along one mesh dim.
struct MeshCoordinate {
  std::string dim;
  int coord = 0, size = 1;
};

int64_t numel(const Box& box);
// The elements the piece holds: its flat range, or its whole box.
int64_t numel(const LocalPiece& piece);
// [flat_begin, flat_end) with -1 resolved.
std::pair<int64_t, int64_t> flat_range(const LocalPiece& piece);
// Whether the piece holds its whole box (no flat range narrows it).
bool is_whole_box(const LocalPiece& piece);
// The whole tensor of `shape`, as a piece.
LocalPiece whole_tensor(const std::vector<int64_t>& shape);
// Elements [begin, end) of `piece`, counted in the piece's own order (0 is its first element): a
// local offset in the tensor a piece lives in becomes a range of the global tensor only through this.
LocalPiece narrow(const LocalPiece& piece, int64_t begin, int64_t end);
// Shard's split of a tensor dim of `extent` over `size` ranks, as torch.chunk cuts it: ceil(extent /
// size) each, the last ones shorter or empty; the range of rank `coord`. A dim that divides evenly
// gets equal parts; a vocabulary that does not is split without padding.
std::pair<int64_t, int64_t> chunk_range(int64_t extent, int coord, int size);
// FlatShard's even split, as ZeRO cuts a bucket: `size` ranges of ceil(numel / size) elements, the
// last ones shorter or empty; the one of rank `coord`.
std::pair<int64_t, int64_t> even_flat_range(int64_t numel, int coord, int size);

// "[0:4, 8:16]", or "[0:4, 8:16] elements 3..9" for a flat range: a piece in messages.
std::string describe(const LocalPiece& piece);

// The piece of `spec` a rank at `coords` holds (a dim `coords` does not name has one rank); nullopt
// when a Stages placement leaves it to other coordinates. Throws std::invalid_argument naming the parameter and the
// dim when a Shard names a dim the tensor lacks or follows a FlatShard.
std::optional<LocalPiece> local_piece(const ParamSpec& spec, const std::vector<MeshCoordinate>& coords);
// The same with every FlatShard left out: the box a rank's flat ranges are cut from. ZeRO takes
// its ranges from its buckets rather than an even split, and narrows this box's piece by them.
std::optional<LocalPiece> local_box(const ParamSpec& spec, const std::vector<MeshCoordinate>& coords);
// Whether a rank at `coords` writes its piece of `spec`: it holds one, and sits at coordinate 0 of
// every mesh dim the spec is replicated over, so that each element is written by one rank.
bool writes_piece(const ParamSpec& spec, const std::vector<MeshCoordinate>& coords);

// A run of elements two pieces of one tensor both hold, consecutive in each: `numel` elements from
// `a_offset` in a's own order and from `b_offset` in b's.
struct SharedRun {
  int64_t a_offset = 0, b_offset = 0, numel = 0;
};
// Every element a and b both hold, as runs in a's order, merged where consecutive in both. Each row
// of the boxes' intersection is consecutive in both boxes (inner dims that both span whole fold into
// it, so two whole-tensor pieces give one run); the flat ranges then clip each row. Costs one step
// per row of the intersection.
std::vector<SharedRun> shared_runs(const LocalPiece& a, const LocalPiece& b);

// Whether every element of `target` lies in exactly one of `pieces` (elements of the pieces outside
// it are ignored): "" when it does, otherwise the first element missed or held twice, counted in
// target's order — "no <noun> holds elements 12..15" or "elements from 12 are held by two <noun>s",
// with the element's coordinates when target is a box of more than one dim. With target the whole
// tensor this is "the pieces cover the tensor exactly once"; with a rank's piece, "the stored chunks
// cover what it asks for". Costs O(R log R) in the runs the pieces share with target.
std::string coverage_error(const std::vector<LocalPiece>& pieces, const LocalPiece& target, const std::string& noun = "piece");

}  // namespace dtrain
