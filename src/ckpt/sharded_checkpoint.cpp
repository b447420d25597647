#include "ckpt/sharded_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <stdexcept>

#include "ckpt/durable_file.h"
#include "ckpt/safetensors.h"
#include "common/positioned_io.h"

namespace dtrain {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "dtrain sharded checkpoint";

using Ranges = std::vector<std::pair<int64_t, int64_t>>;  // [begin, end) each

// "[0:4,8:16]".
std::string ranges_text(const Ranges& ranges) {
  std::string out = "[";
  for (size_t i = 0; i < ranges.size(); ++i) out += (i ? "," : "") + std::to_string(ranges[i].first) + ":" + std::to_string(ranges[i].second);
  return out + "]";
}

// One "[a:b,c:d]" group of a chunk name from `pos` on (advanced past it); nullopt when malformed.
std::optional<Ranges> parse_ranges(const std::string& s, size_t& pos) {
  if (pos >= s.size() || s[pos] != '[') return std::nullopt;
  const size_t close = s.find(']', pos);
  if (close == std::string::npos) return std::nullopt;
  const std::string body = s.substr(pos + 1, close - pos - 1);
  pos = close + 1;
  Ranges out;
  auto number = [](const std::string& digits) -> std::optional<int64_t> {
    if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return std::stoll(digits);
  };
  for (size_t from = 0; !body.empty() && from <= body.size();) {
    const size_t comma = std::min(body.find(',', from), body.size());
    const std::string range = body.substr(from, comma - from);
    const size_t colon = range.find(':');
    if (colon == std::string::npos) return std::nullopt;
    const auto begin = number(range.substr(0, colon)), end = number(range.substr(colon + 1));
    if (!begin || !end || *end < *begin) return std::nullopt;
    out.emplace_back(*begin, *end);
    from = comma + 1;
  }
  return out;
}

// The tensor and piece a chunk name states ("name@[box]" or "name@[box][flat]"); nullopt otherwise.
std::optional<std::pair<std::string, LocalPiece>> parse_chunk_key(const std::string& key) {
  const size_t at = key.rfind('@');
  if (at == std::string::npos || at == 0) return std::nullopt;
  size_t pos = at + 1;
  const auto box = parse_ranges(key, pos);
  if (!box) return std::nullopt;
  LocalPiece piece;
  for (const auto& [begin, end] : *box) {
    piece.box.offset.push_back(begin);
    piece.box.size.push_back(end - begin);
  }
  if (pos < key.size()) {
    const auto flat = parse_ranges(key, pos);
    if (!flat || flat->size() != 1 || pos != key.size()) return std::nullopt;
    piece.flat_begin = flat->front().first;
    piece.flat_end = flat->front().second;
  }
  return std::pair{key.substr(0, at), piece};
}

// Version 1's chunk names: "blocks.0.qkv.weight@4096", its first element in the flattened tensor.
std::string v1_chunk_key(const std::string& tensor, int64_t offset) { return tensor + "@" + std::to_string(offset); }

// How a chunk is stored: the box's shape when it holds the whole box, one dim otherwise.
std::vector<int64_t> stored_shape(const LocalPiece& piece) {
  return is_whole_box(piece) ? piece.box.size : std::vector<int64_t>{numel(piece)};
}

// Why `piece` is not a piece of a tensor of `shape` ("" when it is).
std::string outside(const LocalPiece& piece, const std::vector<int64_t>& shape) {
  if (piece.box.offset.size() != shape.size() || piece.box.size.size() != shape.size())
    return "has " + std::to_string(piece.box.size.size()) + " dims, the tensor " + std::to_string(shape.size());
  for (size_t d = 0; d < shape.size(); ++d)
    if (piece.box.offset[d] < 0 || piece.box.size[d] < 0 || piece.box.offset[d] + piece.box.size[d] > shape[d])
      return "does not lie inside the tensor's shape " + c10::str(at::IntArrayRef(shape));
  const auto [begin, end] = flat_range(piece);
  if (begin < 0 || end < begin || end > numel(piece.box))
    return "has a flat range outside its box's " + std::to_string(numel(piece.box)) + " elements";
  return "";
}

// A chunk in messages: "from element 20" when it is a flat range of the whole tensor (as every
// chunk of a flat layout is), its box and range otherwise.
std::string chunk_text(const LocalPiece& piece, const std::vector<int64_t>& shape) {
  return piece.box.offset == std::vector<int64_t>(shape.size(), 0) && piece.box.size == shape
             ? "from element " + std::to_string(flat_range(piece).first)
             : describe(piece);
}

std::optional<std::vector<int64_t>> sizes(const nlohmann::json& j) {
  if (!j.is_array()) return std::nullopt;
  std::vector<int64_t> out;
  for (const auto& d : j) {
    if (!d.is_number_unsigned()) return std::nullopt;
    out.push_back(d.get<int64_t>());
  }
  return out;
}

// A placement's name in the index, and back.
const std::vector<std::pair<Placement::Kind, std::string>> kPlacementNames = {
    {Placement::Kind::Replicate, "replicate"}, {Placement::Kind::Shard, "shard"}, {Placement::Kind::FlatShard, "flat_shard"},
    {Placement::Kind::Stages, "stages"}};

// {"mesh_dim": "tp", "ranks": 2, "placement": "shard", "dim": 0}: "sharded on dim 0 over tp's 2 ranks".
nlohmann::json placement_json(const SavedPlacement& p) {
  nlohmann::json out = {{"mesh_dim", p.mesh_dim}, {"ranks", p.ranks}};
  for (const auto& [kind, name] : kPlacementNames)
    if (kind == p.placement.kind) out["placement"] = name;
  if (p.placement.kind == Placement::Kind::Shard) out["dim"] = p.placement.dim;
  if (p.placement.kind == Placement::Kind::Stages) out["stages"] = p.placement.stages;
  return out;
}

// One entry of a tensor's "placements" with `dims` dims; throws std::invalid_argument saying what is wrong.
SavedPlacement parse_placement(const nlohmann::json& j, size_t dims) {
  auto bad = [&](const std::string& what) { return std::invalid_argument("placement " + j.dump() + " " + what); };
  if (!j.is_object() || !j.contains("mesh_dim") || !j["mesh_dim"].is_string() || !j.contains("ranks") || !j["ranks"].is_number_unsigned() ||
      j["ranks"].get<uint64_t>() < 1 || j["ranks"].get<uint64_t>() > uint64_t(std::numeric_limits<int>::max()) || !j.contains("placement") ||
      !j["placement"].is_string())
    throw bad("needs mesh_dim, ranks (at least 1) and placement");
  SavedPlacement out{j["mesh_dim"].get<std::string>(), j["ranks"].get<int>(), {}};
  const auto known = std::find_if(kPlacementNames.begin(), kPlacementNames.end(), [&](const auto& n) { return n.second == j["placement"]; });
  if (known == kPlacementNames.end()) throw bad("is none of replicate, shard, flat_shard, stages");
  out.placement.kind = known->first;
  if (out.placement.kind == Placement::Kind::Shard) {
    if (!j.contains("dim") || !j["dim"].is_number_unsigned() || j["dim"].get<uint64_t>() >= dims)
      throw bad("needs the dim it shards, one of the tensor's " + std::to_string(dims));
    out.placement.dim = j["dim"].get<int>();
  }
  if (out.placement.kind == Placement::Kind::Stages) {
    const auto stages = sizes(j.value("stages", nlohmann::json()));
    if (!stages || stages->empty()) throw bad("needs the stages that hold the tensor, a list of coordinates along its mesh dim");
    out.placement.stages.assign(stages->begin(), stages->end());
  }
  return out;
}

// Element `at` (global coordinates) of `box`, counted in the box's row-major order.
int64_t index_in(const Box& box, const std::vector<int64_t>& at) {
  int64_t index = 0;
  for (size_t d = 0; d < at.size(); ++d) index = index * box.size[d] + (at[d] - box.offset[d]);
  return index;
}

}  // namespace

int64_t GlobalTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shard_file_name(int rank) {
  char name[40];
  std::snprintf(name, sizeof name, "shard-%05d.safetensors", rank);
  return name;
}

std::string chunk_key(const std::string& tensor, const LocalPiece& piece) {
  Ranges box;
  for (size_t d = 0; d < piece.box.size.size(); ++d) box.emplace_back(piece.box.offset[d], piece.box.offset[d] + piece.box.size[d]);
  return tensor + "@" + ranges_text(box) + (is_whole_box(piece) ? "" : ranges_text({flat_range(piece)}));
}

void write_shard_file(const std::string& dir, int rank, const std::vector<TensorChunk>& chunks) {
  if (chunks.empty()) return;
  NamedTensors named;
  for (const auto& c : chunks) {
    TORCH_CHECK(c.data.numel() == numel(c.piece), "chunk ", chunk_key(c.tensor, c.piece), " given ", c.data.numel(), " elements");
    named.emplace_back(chunk_key(c.tensor, c.piece), c.data.reshape(stored_shape(c.piece)));
  }
  write_safetensors(dir + "/" + shard_file_name(rank), named);
}

void write_checkpoint_index(const std::string& dir, const std::map<std::string, GlobalTensor>& tensors,
                            const nlohmann::json& metadata) {
  std::map<std::string, nlohmann::json> chunks;
  std::map<std::string, std::vector<LocalPiece>> pieces;
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("shard-", 0) == 0) files.push_back(name);
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    for (const auto& e : read_safetensors_header(dir + "/" + file)) {
      auto bad = [&](const std::string& what) { throw std::runtime_error(dir + "/" + file + ": chunk '" + e.name + "' " + what); };
      const auto parsed = parse_chunk_key(e.name);
      if (!parsed) bad("is not named tensor@[box] or tensor@[box][flat range]");
      const auto& [tensor, piece] = *parsed;
      auto global = tensors.find(tensor);
      if (global == tensors.end()) bad("belongs to no tensor of this checkpoint");
      if (e.dtype != global->second.dtype)
        bad(std::string("is ") + c10::toString(e.dtype) + ", the tensor is " + c10::toString(global->second.dtype));
      if (const std::string why = outside(piece, global->second.shape); !why.empty()) bad(why);
      if (e.shape != stored_shape(piece))
        bad("has shape " + c10::str(at::IntArrayRef(e.shape)) + " where its piece needs " + c10::str(at::IntArrayRef(stored_shape(piece))));
      nlohmann::json chunk = {{"file", file}, {"offset", piece.box.offset}, {"size", piece.box.size}};
      if (!is_whole_box(piece)) chunk["flat_range"] = {flat_range(piece).first, flat_range(piece).second};
      chunk["byte_range"] = {e.begin, e.end};
      chunks[tensor].push_back(std::move(chunk));
      pieces[tensor].push_back(piece);
    }
  }
  nlohmann::json index = {
      {"format", kFormat}, {"version", kCheckpointIndexVersion}, {"metadata", metadata}, {"tensors", nlohmann::json::object()}};
  for (const auto& [name, global] : tensors) {
    const std::string error = coverage_error(pieces[name], whole_tensor(global.shape), "chunk");
    if (!error.empty()) throw std::runtime_error("checkpoint " + dir + ": tensor '" + name + "': " + error);
    const nlohmann::json held = chunks.count(name) ? chunks[name] : nlohmann::json::array();  // none for an empty tensor
    nlohmann::json placements = nlohmann::json::array();
    for (const SavedPlacement& p : global.placements) placements.push_back(placement_json(p));
    index["tensors"][name] = {
        {"dtype", safetensors_dtype_name(global.dtype)}, {"shape", global.shape}, {"placements", placements}, {"chunks", held}};
  }
  write_file_atomically(dir + "/" + kCheckpointIndexFile, index.dump(1));
}

ShardedCheckpointReader::ShardedCheckpointReader(const std::string& dir)
    : dir_(dir), index_path_(dir + "/" + kCheckpointIndexFile) {
  auto bad = [&](const std::string& what) -> std::runtime_error {
    return std::runtime_error("checkpoint file '" + index_path_ + "' " + what);
  };
  std::error_code ec;
  if (!fs::exists(index_path_, ec))
    throw bad("is missing: '" + dir + "' is not a sharded checkpoint (written by an older dtrain?)");
  nlohmann::json index;
  try {
    index = read_json_file(index_path_);
  } catch (const NotJson& e) {
    throw bad(e.what());
  }
  if (!index.is_object() || index.value("format", "") != kFormat || !index.contains("tensors") || !index["tensors"].is_object())
    throw bad("is not a dtrain checkpoint index");
  const nlohmann::json version = index.value("version", nlohmann::json());
  if (version != 1 && version != kCheckpointIndexVersion)
    throw bad("has version " + version.dump() + "; this dtrain reads versions 1 and " + std::to_string(kCheckpointIndexVersion));
  version_ = version.get<int>();
  metadata_ = index.value("metadata", nlohmann::json::object());
  for (auto it = index["tensors"].begin(); it != index["tensors"].end(); ++it) {
    try {
      add_tensor(it.key(), it.value());
    } catch (const std::invalid_argument& e) {
      throw bad("has a malformed entry for '" + it.key() + "': " + e.what());
    }
  }
  check_chunks_against_files();
}

// One tensor's entry: its global shape and dtype, and chunks that cover it exactly once. Throws
// std::invalid_argument saying what is wrong, for the caller to name the index and the tensor.
void ShardedCheckpointReader::add_tensor(const std::string& name, const nlohmann::json& spec) {
  if (!spec.is_object() || !spec.contains("dtype") || !spec["dtype"].is_string() || !spec.contains("shape") ||
      !spec.contains("chunks") || !spec["chunks"].is_array())
    throw std::invalid_argument("it needs dtype, shape and chunks");
  const auto dtype = safetensors_dtype(spec["dtype"].get<std::string>());
  if (!dtype) throw std::invalid_argument("unknown dtype " + spec["dtype"].dump());
  const auto shape = sizes(spec["shape"]);
  if (!shape) throw std::invalid_argument("a shape entry is not a size");
  GlobalTensor global{*shape, *dtype, {}};
  if (spec.contains("placements")) {  // absent from the indexes of dtrain before tensor parallelism
    if (!spec["placements"].is_array()) throw std::invalid_argument("placements is not a list");
    for (const auto& p : spec["placements"]) global.placements.push_back(parse_placement(p, shape->size()));
  }
  std::vector<Chunk> chunks;
  std::vector<LocalPiece> pieces;
  for (const auto& c : spec["chunks"]) {
    chunks.push_back(parse_chunk(name, global, c));
    pieces.push_back(chunks.back().piece);
  }
  if (const std::string error = coverage_error(pieces, whole_tensor(global.shape), "chunk"); !error.empty())
    throw std::invalid_argument(error);
  std::vector<BoxChunks>& boxes = chunks_[name];
  for (Chunk& c : chunks) {
    auto same = std::find_if(boxes.begin(), boxes.end(), [&](const BoxChunks& b) {
      return b.box.offset == c.piece.box.offset && b.box.size == c.piece.box.size;
    });
    if (same == boxes.end()) same = boxes.insert(boxes.end(), BoxChunks{c.piece.box, {}});
    same->chunks.push_back(std::move(c));
  }
  for (BoxChunks& b : boxes)
    std::sort(b.chunks.begin(), b.chunks.end(),
              [](const Chunk& x, const Chunk& y) { return flat_range(x.piece).first < flat_range(y.piece).first; });
  tensors_[name] = global;
}

ShardedCheckpointReader::Chunk ShardedCheckpointReader::parse_chunk(const std::string& name, const GlobalTensor& global,
                                                                     const nlohmann::json& c) const {
  auto field = [&](const char* key) { return c.is_object() && c.contains(key) && c[key].is_number_unsigned(); };
  if (!c.is_object() || !c.contains("file") || !c["file"].is_string())
    throw std::invalid_argument(version_ == 1 ? "a chunk needs file, offset, numel and byte_offset" : "a chunk needs file, offset, size and byte_range");
  Chunk chunk;
  chunk.file = c["file"];
  // A chunk's file is one of the checkpoint's own: never a path that leads out of it.
  if (chunk.file.empty() || chunk.file.find('/') != std::string::npos || chunk.file == "." || chunk.file == "..")
    throw std::invalid_argument("chunk file '" + chunk.file + "' is not a file of the checkpoint");
  const int64_t item = int64_t(c10::elementSize(global.dtype));
  if (version_ == 1) {  // a flat range of the whole flattened tensor
    if (!field("offset") || !field("numel") || !field("byte_offset"))
      throw std::invalid_argument("a chunk needs file, offset, numel and byte_offset");
    const int64_t offset = c["offset"].get<int64_t>(), n = c["numel"].get<int64_t>();
    if (offset > global.numel() || n > global.numel() - offset)
      throw std::invalid_argument("chunks run past its " + std::to_string(global.numel()) + " elements");
    chunk.piece = narrow(whole_tensor(global.shape), offset, offset + n);
    chunk.key = v1_chunk_key(name, offset);
    chunk.stored_shape = {n};
    chunk.begin = c["byte_offset"].get<uint64_t>();
    chunk.end = chunk.begin + uint64_t(n * item);
    return chunk;
  }
  const auto offset = sizes(c.value("offset", nlohmann::json())), size = sizes(c.value("size", nlohmann::json()));
  const auto bytes = sizes(c.value("byte_range", nlohmann::json()));
  if (!offset || !size || !bytes || bytes->size() != 2) throw std::invalid_argument("a chunk needs file, offset, size and byte_range");
  chunk.piece.box = {*offset, *size};
  if (c.contains("flat_range")) {
    const auto flat = sizes(c["flat_range"]);
    if (!flat || flat->size() != 2) throw std::invalid_argument("a chunk's flat_range is not [begin, end]");
    chunk.piece.flat_begin = (*flat)[0];
    chunk.piece.flat_end = (*flat)[1];
  }
  if (const std::string why = outside(chunk.piece, global.shape); !why.empty())
    throw std::invalid_argument("chunk " + describe(chunk.piece) + " " + why);
  chunk.key = chunk_key(name, chunk.piece);
  chunk.stored_shape = stored_shape(chunk.piece);
  chunk.begin = uint64_t((*bytes)[0]);
  chunk.end = uint64_t((*bytes)[1]);
  return chunk;
}

// The index is written from the shard files' headers, so each chunk must be there as the index says:
// an index edited afterwards (with its manifest entry rewritten to match) would otherwise read another
// tensor's bytes, or bytes shifted by a few elements, as this one's, without a word.
void ShardedCheckpointReader::check_chunks_against_files() const {
  std::map<std::string, std::map<std::string, SafetensorsEntry>> headers;  // file -> chunk key -> entry
  for (const auto& [name, boxes] : chunks_)
    for (const BoxChunks& box : boxes)
      for (const Chunk& c : box.chunks) {
        const std::string path = dir_ + "/" + c.file;
        if (!headers.count(c.file))
          for (auto& e : read_safetensors_header(path)) headers[c.file].emplace(e.name, std::move(e));
        const GlobalTensor& global = tensors_.at(name);
        auto disagree = [&](const std::string& what) {
          return std::runtime_error("checkpoint file '" + index_path_ + "' disagrees with '" + path + "' about tensor '" + name +
                                    "' (its chunk " + chunk_text(c.piece, global.shape) + "): " + what + "; the checkpoint is damaged");
        };
        const auto found = headers[c.file].find(c.key);
        if (found == headers[c.file].end()) throw disagree("the file holds no such chunk");
        const SafetensorsEntry& e = found->second;
        if (e.dtype != global.dtype)
          throw disagree(std::string("the index says ") + c10::toString(global.dtype) + ", the file " + c10::toString(e.dtype));
        if (e.shape != c.stored_shape)
          throw disagree("the index says shape " + c10::str(at::IntArrayRef(c.stored_shape)) + ", the file's shape is " +
                         c10::str(at::IntArrayRef(e.shape)));
        if (e.begin != c.begin)
          throw disagree("the index says byte offset " + std::to_string(c.begin) + ", the file's header " + std::to_string(e.begin));
        if (e.end != c.end)
          throw disagree("the index says its bytes end at " + std::to_string(c.end) + ", the file's header at " + std::to_string(e.end));
      }
}

ShardedCheckpointReader::~ShardedCheckpointReader() {
  for (const auto& [file, fd] : open_) ::close(fd);
}

const GlobalTensor& ShardedCheckpointReader::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw std::runtime_error(index_path_ + " has no tensor '" + name + "'");
  return it->second;
}

int ShardedCheckpointReader::descriptor(const std::string& file) {
  if (auto it = open_.find(file); it != open_.end()) return it->second;
  const std::string path = dir_ + "/" + file;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("checkpoint file '" + path + "' cannot be opened: " + std::strerror(errno));
  open_[file] = fd;
  return fd;
}

// Per box of the tensor that the piece's box meets, the part of that box the piece can touch is one
// span of its order (from the intersection's first corner to its last, or the piece's own flat range
// when the boxes are the same), and the box's chunks are sorted by flat range: a binary search finds
// the first chunk reaching the span. Cost O(B + sum over the boxes met of (log C + K)), with B the
// tensor's distinct boxes (1 for a flat layout, the tensor-parallel grid otherwise: never the number
// of ranks times buckets), C a box's chunks and K those returned; never a scan of every chunk.
std::vector<const ShardedCheckpointReader::Chunk*> ShardedCheckpointReader::overlapping(const std::string& name,
                                                                                      const LocalPiece& piece) const {
  std::vector<const Chunk*> out;
  for (const BoxChunks& b : chunks_.at(name)) {
    const size_t dims = b.box.size.size();
    std::vector<int64_t> lo(dims), last(dims);
    bool meets = true;
    for (size_t d = 0; d < dims; ++d) {
      lo[d] = std::max(piece.box.offset[d], b.box.offset[d]);
      last[d] = std::min(piece.box.offset[d] + piece.box.size[d], b.box.offset[d] + b.box.size[d]) - 1;
      meets = meets && last[d] >= lo[d];
    }
    if (!meets) continue;
    int64_t begin = index_in(b.box, lo), end = index_in(b.box, last) + 1;
    if (piece.box.offset == b.box.offset && piece.box.size == b.box.size) {
      begin = std::max(begin, flat_range(piece).first);
      end = std::min(end, flat_range(piece).second);
    }
    auto it = std::partition_point(b.chunks.begin(), b.chunks.end(), [&](const Chunk& c) { return flat_range(c.piece).second <= begin; });
    for (; it != b.chunks.end() && flat_range(it->piece).first < end; ++it) out.push_back(&*it);
  }
  return out;
}

void ShardedCheckpointReader::read(const std::string& name, const LocalPiece& piece, at::Tensor out) {
  const GlobalTensor& global = tensor(name);
  if (const std::string why = outside(piece, global.shape); !why.empty())
    throw std::runtime_error(index_path_ + ": the piece " + describe(piece) + " asked of '" + name + "' " + why);
  const int64_t n = numel(piece);
  TORCH_CHECK(out.numel() == n && out.scalar_type() == global.dtype, "reading '", name, "' into a tensor of another kind");
  const std::vector<const Chunk*> chunks = overlapping(name, piece);
  std::vector<LocalPiece> held;
  for (const Chunk* c : chunks) held.push_back(c->piece);
  if (const std::string gap = coverage_error(held, piece, "chunk"); !gap.empty())
    throw std::runtime_error(index_path_ + ": reading " + describe(piece) + " of '" + name + "': " + gap);
  at::Tensor host = out.is_cpu() && out.is_contiguous() ? out : at::empty({n}, out.options().device(at::kCPU));
  const size_t item = host.element_size();
  for (const Chunk* c : chunks)
    for (const SharedRun& run : shared_runs(piece, c->piece)) {
      char* dst = static_cast<char*>(host.data_ptr()) + run.a_offset * int64_t(item);
      const size_t bytes = size_t(run.numel) * item;
      if (transfer_all(false, descriptor(c->file), dst, bytes, off_t(c->begin + uint64_t(run.b_offset) * item)) != bytes)
        throw std::runtime_error("checkpoint file '" + dir_ + "/" + c->file + "' is truncated or unreadable where '" + name +
                                 "' should be" + (errno ? std::string(": ") + std::strerror(errno) : std::string()));
    }
  if (!host.is_same(out)) out.copy_(host.view(out.sizes()));
}

void ShardedCheckpointReader::read(const std::string& name, int64_t offset, at::Tensor out) {
  const GlobalTensor& global = tensor(name);
  const int64_t n = out.numel();
  TORCH_CHECK(out.dim() == 1, "reading '", name, "' into a tensor of another kind");
  if (offset < 0 || offset + n > global.numel())
    throw std::runtime_error(index_path_ + ": elements " + std::to_string(offset) + ".." + std::to_string(offset + n - 1) + " of '" +
                             name + "' lie outside its " + std::to_string(global.numel()));
  read(name, narrow(whole_tensor(global.shape), offset, offset + n), out);
}

at::Tensor ShardedCheckpointReader::read(const std::string& name) {
  const GlobalTensor& global = tensor(name);
  at::Tensor out = at::empty(global.shape, at::TensorOptions().dtype(global.dtype));
  read(name, whole_tensor(global.shape), out);
  return out;
}

}  // namespace dtrain
