#include "ckpt/sharded_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "ckpt/durable_file.h"
#include "ckpt/safetensors.h"
#include "common/positioned_io.h"

namespace dtrain {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "dtrain sharded checkpoint";
constexpr int kVersion = 1;

// A chunk's key in its shard file: "model/blocks.0.q_proj.weight@4096".
std::string chunk_key(const std::string& tensor, int64_t offset) { return tensor + "@" + std::to_string(offset); }

// Every element of a `numel`-element tensor in exactly one of `ranges` ((offset, numel) pairs, any
// order); otherwise what is wrong, naming the first element missed or held twice.
std::string coverage_error(std::vector<std::pair<int64_t, int64_t>> ranges, int64_t numel) {
  std::sort(ranges.begin(), ranges.end());
  int64_t next = 0;
  for (const auto& [offset, n] : ranges) {
    if (offset > next) return "no chunk holds elements " + std::to_string(next) + ".." + std::to_string(offset - 1);
    if (offset < next) return "elements from " + std::to_string(offset) + " are held by two chunks";
    next = offset + n;
  }
  if (next < numel) return "no chunk holds elements " + std::to_string(next) + ".." + std::to_string(numel - 1);
  if (next > numel) return "chunks run past its " + std::to_string(numel) + " elements";
  return "";
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

void write_shard_file(const std::string& dir, int rank, const std::vector<TensorChunk>& chunks) {
  if (chunks.empty()) return;
  NamedTensors named;
  for (const auto& c : chunks) named.emplace_back(chunk_key(c.tensor, c.offset), c.data.reshape({-1}));
  write_safetensors(dir + "/" + shard_file_name(rank), named);
}

void write_checkpoint_index(const std::string& dir, const std::map<std::string, GlobalTensor>& tensors,
                            const nlohmann::json& metadata) {
  std::map<std::string, nlohmann::json> chunks;
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> ranges;
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("shard-", 0) == 0) files.push_back(name);
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    for (const auto& e : read_safetensors_header(dir + "/" + file)) {
      const size_t at = e.name.rfind('@');
      auto bad = [&](const std::string& what) { throw std::runtime_error(dir + "/" + file + ": chunk '" + e.name + "' " + what); };
      if (at == std::string::npos) bad("is not named tensor@offset");
      const std::string tensor = e.name.substr(0, at), digits = e.name.substr(at + 1);
      if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos)
        bad("is not named tensor@offset");
      const int64_t offset = std::stoll(digits);
      auto global = tensors.find(tensor);
      if (global == tensors.end()) bad("belongs to no tensor of this checkpoint");
      if (e.dtype != global->second.dtype)
        bad(std::string("is ") + c10::toString(e.dtype) + ", the tensor is " + c10::toString(global->second.dtype));
      const int64_t numel = e.shape.empty() ? 1 : e.shape[0];
      if (e.shape.size() != 1 || offset < 0 || offset + numel > global->second.numel())
        bad("does not lie inside the tensor's " + std::to_string(global->second.numel()) + " elements");
      chunks[tensor].push_back({{"file", file}, {"offset", offset}, {"numel", numel}, {"byte_offset", e.begin}});
      ranges[tensor].emplace_back(offset, numel);
    }
  }
  nlohmann::json index = {{"format", kFormat}, {"version", kVersion}, {"metadata", metadata}, {"tensors", nlohmann::json::object()}};
  for (const auto& [name, global] : tensors) {
    const std::string error = coverage_error(ranges[name], global.numel());
    if (!error.empty()) throw std::runtime_error("checkpoint " + dir + ": tensor '" + name + "': " + error);
    const nlohmann::json held = chunks.count(name) ? chunks[name] : nlohmann::json::array();  // none for an empty tensor
    index["tensors"][name] = {{"dtype", safetensors_dtype_name(global.dtype)}, {"shape", global.shape}, {"chunks", held}};
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
  if (index.value("version", 0) != kVersion)
    throw bad("has version " + index["version"].dump() + "; this dtrain reads version " + std::to_string(kVersion));
  metadata_ = index.value("metadata", nlohmann::json::object());
  for (auto it = index["tensors"].begin(); it != index["tensors"].end(); ++it) {
    const std::string& name = it.key();
    const auto& spec = it.value();
    auto bad_tensor = [&](const std::string& what) { return bad("has a malformed entry for '" + name + "': " + what); };
    if (!spec.is_object() || !spec.contains("dtype") || !spec["dtype"].is_string() || !spec.contains("shape") ||
        !spec["shape"].is_array() || !spec.contains("chunks") || !spec["chunks"].is_array())
      throw bad_tensor("it needs dtype, shape and chunks");
    const auto dtype = safetensors_dtype(spec["dtype"].get<std::string>());
    if (!dtype) throw bad_tensor("unknown dtype " + spec["dtype"].dump());
    GlobalTensor global{{}, *dtype};
    for (const auto& d : spec["shape"]) {
      if (!d.is_number_unsigned()) throw bad_tensor("a shape entry is not a size");
      global.shape.push_back(d.get<int64_t>());
    }
    std::vector<Chunk> chunks;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (const auto& c : spec["chunks"]) {
      if (!c.is_object() || !c.contains("file") || !c["file"].is_string() || !c.contains("offset") || !c["offset"].is_number_unsigned() ||
          !c.contains("numel") || !c["numel"].is_number_unsigned() || !c.contains("byte_offset") || !c["byte_offset"].is_number_unsigned())
        throw bad_tensor("a chunk needs file, offset, numel and byte_offset");
      const std::string file = c["file"];
      // A chunk's file is one of the checkpoint's own: never a path that leads out of it.
      if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
        throw bad_tensor("chunk file '" + file + "' is not a file of the checkpoint");
      chunks.push_back({file, c["offset"].get<int64_t>(), c["numel"].get<int64_t>(), c["byte_offset"].get<uint64_t>()});
      ranges.emplace_back(chunks.back().offset, chunks.back().numel);
    }
    if (const std::string error = coverage_error(ranges, global.numel()); !error.empty()) throw bad_tensor(error);
    std::sort(chunks.begin(), chunks.end(), [](const Chunk& a, const Chunk& b) { return a.offset < b.offset; });
    tensors_[name] = global;
    chunks_[name] = std::move(chunks);
  }
  check_chunks_against_files();
}

// The index is written from the shard files' headers, so each chunk must be there as the index says:
// an index edited afterwards (with its manifest entry rewritten to match) would otherwise read another
// tensor's bytes, or bytes shifted by a few elements, as this one's, without a word.
void ShardedCheckpointReader::check_chunks_against_files() const {
  std::map<std::string, std::map<std::string, SafetensorsEntry>> headers;  // file -> chunk key -> entry
  for (const auto& [name, chunks] : chunks_)
    for (const Chunk& c : chunks) {
      const std::string path = dir_ + "/" + c.file;
      if (!headers.count(c.file))
        for (auto& e : read_safetensors_header(path)) headers[c.file].emplace(e.name, std::move(e));
      auto disagree = [&](const std::string& what) {
        return std::runtime_error("checkpoint file '" + index_path_ + "' disagrees with '" + path + "' about tensor '" + name +
                                  "' (its chunk from element " + std::to_string(c.offset) + "): " + what + "; the checkpoint is damaged");
      };
      const auto found = headers[c.file].find(chunk_key(name, c.offset));
      if (found == headers[c.file].end()) throw disagree("the file holds no such chunk");
      const SafetensorsEntry& e = found->second;
      const GlobalTensor& global = tensors_.at(name);
      if (e.dtype != global.dtype)
        throw disagree(std::string("the index says ") + c10::toString(global.dtype) + ", the file " + c10::toString(e.dtype));
      if (e.shape != std::vector<int64_t>{c.numel})
        throw disagree("the index says " + std::to_string(c.numel) + " elements, the file's shape is " + c10::str(at::IntArrayRef(e.shape)));
      if (e.begin != c.begin)
        throw disagree("the index says byte offset " + std::to_string(c.begin) + ", the file's header " + std::to_string(e.begin));
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

void ShardedCheckpointReader::read(const std::string& name, int64_t offset, at::Tensor out) {
  const GlobalTensor& global = tensor(name);
  const int64_t n = out.numel();
  TORCH_CHECK(out.dim() == 1 && out.scalar_type() == global.dtype, "reading '", name, "' into a tensor of another kind");
  if (offset < 0 || offset + n > global.numel())
    throw std::runtime_error(index_path_ + ": elements " + std::to_string(offset) + ".." + std::to_string(offset + n - 1) + " of '" +
                             name + "' lie outside its " + std::to_string(global.numel()));
  at::Tensor host = out.is_cpu() && out.is_contiguous() ? out : at::empty({n}, out.options().device(at::kCPU));
  const size_t item = host.element_size();
  for (const Chunk& c : chunks_.at(name)) {
    const int64_t from = std::max(offset, c.offset), to = std::min(offset + n, c.offset + c.numel);
    if (from >= to) continue;
    char* dst = static_cast<char*>(host.data_ptr()) + (from - offset) * item;
    const size_t bytes = size_t(to - from) * item;
    if (transfer_all(false, descriptor(c.file), dst, bytes, off_t(c.begin + uint64_t(from - c.offset) * item)) != bytes)
      throw std::runtime_error("checkpoint file '" + dir_ + "/" + c.file + "' is truncated or unreadable where '" + name +
                               "' should be" + (errno ? std::string(": ") + std::strerror(errno) : std::string()));
  }
  if (!host.is_same(out)) out.copy_(host);
}

at::Tensor ShardedCheckpointReader::read(const std::string& name) {
  const GlobalTensor& global = tensor(name);
  at::Tensor out = at::empty({global.numel()}, at::TensorOptions().dtype(global.dtype));
  read(name, 0, out);
  return out.view(global.shape);
}

}  // namespace dtrain
