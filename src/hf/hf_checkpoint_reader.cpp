#include "hf/hf_checkpoint_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "ckpt/durable_file.h"
#include "common/positioned_io.h"
#include "common/printable.h"

namespace dtrain {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The weights' files and, with an index, which file holds each tensor (empty without one).
std::map<std::string, std::string> weight_map(const std::string& dir, std::vector<std::string>& files) {
  const std::string index_path = dir + "/" + kHfWeightsIndexFile;
  if (!fs::exists(index_path)) {
    if (!fs::exists(dir + "/" + kHfWeightsFile))
      throw std::runtime_error(dir + " has neither " + kHfWeightsFile + " nor " + kHfWeightsIndexFile +
                               ": dtrain imports safetensors weights (pytorch_model.bin is a pickle, which loading would run; "
                               "save it again with save_pretrained(..., safe_serialization=True))");
    files = {kHfWeightsFile};
    return {};
  }
  json index;
  try {
    index = read_json_file(index_path);
  } catch (const NotJson& e) {
    throw std::runtime_error(index_path + ": " + e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw std::runtime_error(index_path + ": has no 'weight_map' object");
  std::map<std::string, std::string> map;
  for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
    if (!it.value().is_string() || it.value().get<std::string>().find('/') != std::string::npos)
      throw std::runtime_error(index_path + ": 'weight_map' entry '" + printable(it.key()) + "' is " + it.value().dump() +
                               ", not a file name in the directory");
    const std::string file = it.value().get<std::string>();
    if (!fs::exists(dir + "/" + file))
      throw std::runtime_error(index_path + " names the shard '" + printable(file) + "' (for '" + printable(it.key()) +
                               "'), which does not exist in " + dir);
    if (std::find(files.begin(), files.end(), file) == files.end()) files.push_back(file);
    map[it.key()] = file;
  }
  return map;
}

}  // namespace

HfCheckpointReader::HfCheckpointReader(const std::string& dir, const TransformerConfig& run)
    : dir_(dir), run_(run), shape_(read_hf_model_shape(dir)) {
  if (!run.is_llama() && run.seq_len > shape_.positions)
    throw std::runtime_error(dir + "/" + kHfConfigFile + ": n_positions is " + std::to_string(shape_.positions) + ", fewer than model.seq_len " +
                             std::to_string(run.seq_len) + ": GPT-2's position table has no rows for the later positions");
  tensors_ = hf_tensors(run, shape_.positions);
  std::vector<std::string> files;
  const std::map<std::string, std::string> map = weight_map(dir, files);
  std::map<std::string, Stored> headers;  // every stored tensor, by its name in its file
  for (const std::string& file : files)
    for (const SafetensorsEntry& e : read_safetensors_header(dir + "/" + file)) headers[e.name] = {file, e};
  const std::string weights = dir + "/" + (map.empty() ? kHfWeightsFile : kHfWeightsIndexFile);
  for (const HfTensor& t : tensors_) {
    // GPT-2 as first published was saved from GPT2Model, without the "transformer." prefix.
    std::string name = t.name;
    if (!headers.count(name) && name.rfind("transformer.", 0) == 0 && headers.count(name.substr(12))) name = name.substr(12);
    const auto it = headers.find(name);
    if (it == headers.end())
      throw std::runtime_error(weights + " has no tensor '" + t.name + "', which the " + run.arch + " model of " + dir + "/" + kHfConfigFile +
                               " needs (for dtrain's " + t.parts.front() + ")");
    const Stored& s = it->second;
    if (!map.empty() && map.count(name) && map.at(name) != s.file)
      throw std::runtime_error(weights + " says '" + name + "' is in " + map.at(name) + ", but it is in " + s.file);
    if (s.entry.shape != t.shape)
      throw std::runtime_error(dir + "/" + s.file + ": tensor '" + name + "' has shape " + shape_text(s.entry.shape) + ", but the model of " +
                               dir + "/" + kHfConfigFile + " needs " + shape_text(t.shape));
    if (!at::isFloatingType(s.entry.dtype))
      throw std::runtime_error(dir + "/" + s.file + ": tensor '" + name + "' is " + c10::toString(s.entry.dtype) + ", not floating point");
    stored_[t.name] = s;
  }
}

HfCheckpointReader::~HfCheckpointReader() {
  for (const auto& [file, fd] : open_) ::close(fd);
}

int HfCheckpointReader::descriptor(const std::string& file) {
  if (auto it = open_.find(file); it != open_.end()) return it->second;
  const std::string path = dir_ + "/" + file;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("'" + path + "' cannot be opened: " + std::strerror(errno));
  return open_[file] = fd;
}

at::Tensor HfCheckpointReader::read_box(const HfTensor& t, const Box& box) {
  const Stored& s = stored_.at(t.name);
  at::Tensor host = at::empty(box.size, at::TensorOptions().dtype(s.entry.dtype));
  const size_t item = host.element_size();
  // Each row of the box is consecutive in the file (shared_runs merges rows that are consecutive too).
  for (const SharedRun& run : shared_runs(LocalPiece{box}, whole_tensor(s.entry.shape))) {
    char* dst = static_cast<char*>(host.data_ptr()) + run.a_offset * int64_t(item);
    const size_t bytes = size_t(run.numel) * item;
    if (transfer_all(false, descriptor(s.file), dst, bytes, off_t(s.entry.begin + uint64_t(run.b_offset) * item)) != bytes)
      throw std::runtime_error("'" + dir_ + "/" + s.file + "' is truncated or unreadable where '" + t.name + "' should be" +
                               (errno ? std::string(": ") + std::strerror(errno) : std::string()));
  }
  return host;
}

void HfCheckpointReader::read(const std::string& name, const LocalPiece& piece, at::Tensor out) {
  const HfSource src = hf_source(tensors_, run_, name);
  const HfTensor& t = *src.tensor;
  const auto [flat_begin, flat_end] = flat_range(piece);
  Box box = piece.box;
  at::Tensor values;
  if (!t.transposed) {
    box.offset[0] += src.offset;
    values = read_box(t, box).flatten().slice(0, flat_begin, flat_end);
  } else {
    // Only the rows of dtrain's [out, in] box that the flat range reaches, read as the stored
    // tensor's columns and transposed back.
    const int64_t cols = box.size[1], first = cols ? flat_begin / cols : 0, last = cols ? (flat_end + cols - 1) / cols : 0;
    const Box stored{{box.offset[1], src.offset + box.offset[0] + first}, {cols, last - first}};
    values = read_box(t, stored).t().contiguous().flatten().slice(0, flat_begin - first * cols, flat_end - first * cols);
  }
  TORCH_CHECK(out.numel() == values.numel(), "reading '", name, "' into a tensor of another size");
  out.copy_(values.view(out.sizes()));
}

void load_hf_parameters(HfCheckpointReader& hf, const std::vector<HeldParameter>& parameters) {
  for (const HeldParameter& p : parameters)
    for (const PlacedPiece& placed : p.pieces)
      if (numel(placed.piece) > 0) hf.read(p.spec.name, placed.piece, p.local.narrow(0, placed.local_offset, numel(placed.piece)));
}

}  // namespace dtrain
