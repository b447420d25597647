#include "ckpt/safetensors.h"

#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include "ckpt/durable_file.h"

namespace dtrain {

namespace {

const std::vector<std::pair<std::string, at::ScalarType>>& dtype_names() {
  static const std::vector<std::pair<std::string, at::ScalarType>> names = {
      {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16}, {"I64", at::kLong},
      {"I32", at::kInt},    {"I16", at::kShort}, {"I8", at::kChar},  {"U8", at::kByte},       {"BOOL", at::kBool}};
  return names;
}

}  // namespace

std::string safetensors_dtype_name(at::ScalarType t) {
  for (const auto& [name, type] : dtype_names())
    if (type == t) return name;
  throw std::runtime_error(std::string("safetensors cannot store dtype ") + c10::toString(t));
}

std::optional<at::ScalarType> safetensors_dtype(const std::string& name) {
  for (const auto& [n, type] : dtype_names())
    if (n == name) return type;
  return std::nullopt;
}

namespace {

[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
  throw std::runtime_error("safetensors file '" + path + "': " + what);
}

// A header is untrusted input: every field is checked before any arithmetic or allocation uses it.
// 100 MB is far beyond any real header (the format's reference reader stops there too).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

struct TensorEntry {
  std::string name;
  at::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;  // offsets into the data section
};

struct Header {
  std::vector<TensorEntry> tensors;
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0, file_size = 0;
};

TensorEntry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& spec, uint64_t data_bytes) {
  auto bad = [&](const std::string& what) { bad_file(path, "tensor '" + name + "' " + what); };
  if (!spec.is_object() || !spec.contains("dtype") || !spec.contains("shape") || !spec.contains("data_offsets"))
    bad("must be an object with dtype, shape and data_offsets");
  TensorEntry e{name, at::kFloat, {}, 0, 0};
  const auto& dtype = spec["dtype"];
  const auto known = dtype.is_string() ? safetensors_dtype(dtype.get<std::string>()) : std::nullopt;
  if (!known) bad("has unsupported dtype " + dtype.dump());
  e.dtype = *known;
  if (!spec["shape"].is_array()) bad("has a shape that is not a list");
  uint64_t bytes = c10::elementSize(e.dtype);
  for (const auto& d : spec["shape"]) {
    if (!d.is_number_unsigned()) bad("has a shape entry that is not a size: " + d.dump());
    const uint64_t n = d.get<uint64_t>();
    if (n != 0 && bytes > data_bytes / n) bad("has a shape larger than the file");
    bytes *= n;
    e.shape.push_back(int64_t(n));
  }
  const auto& off = spec["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    bad("has data_offsets that are not two byte offsets");
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  if (e.begin > e.end) bad("has data_offsets that end before they begin");
  if (e.end > data_bytes)
    bad_file(path, "is truncated: tensor '" + name + "' needs " + std::to_string(e.end) + " data bytes, the file has " +
                       std::to_string(data_bytes));
  if (e.end - e.begin != bytes)
    bad("has " + std::to_string(e.end - e.begin) + " bytes, its shape and dtype need " + std::to_string(bytes));
  return e;
}

Header read_header(const std::string& path, std::ifstream& in) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) bad_file(path, "does not exist");
  if (!S_ISREG(st.st_mode)) bad_file(path, "is not a regular file");
  const uint64_t file_size = uint64_t(st.st_size);
  uint64_t n = 0;
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(&n), 8)) bad_file(path, "is shorter than its 8-byte header length");
  if (n > kMaxHeaderBytes) bad_file(path, "claims a header of " + std::to_string(n) + " bytes, more than any real one (damaged?)");
  if (n > file_size - 8)
    bad_file(path, "is truncated: its header needs " + std::to_string(n) + " bytes after the length, the file has " +
                       std::to_string(file_size - 8));
  std::string text(n, '\0');
  in.read(text.data(), std::streamsize(n));
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    bad_file(path, std::string("header is not valid JSON (") + e.what() + ")");
  }
  if (!json.is_object()) bad_file(path, "header is not a JSON object");
  Header h;
  h.data_start = 8 + n;
  h.file_size = file_size;
  const uint64_t data_bytes = file_size - h.data_start;
  for (auto it = json.begin(); it != json.end(); ++it) {
    if (it.key() != "__metadata__") {
      h.tensors.push_back(parse_entry(path, it.key(), it.value(), data_bytes));
      continue;
    }
    if (!it.value().is_object()) bad_file(path, "__metadata__ is not a JSON object");
    for (auto m = it.value().begin(); m != it.value().end(); ++m) {
      if (!m.value().is_string()) bad_file(path, "__metadata__ entry '" + m.key() + "' is not a string");
      h.metadata[m.key()] = m.value().get<std::string>();
    }
  }
  // Tensors may not share bytes: an overlap means the offsets were edited.
  std::vector<const TensorEntry*> by_offset;
  for (const auto& e : h.tensors) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      bad_file(path, "tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name + "' overlap");
  return h;
}

}  // namespace

void write_safetensors(const std::string& path, const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> cpu;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    at::Tensor c = t.detach().to(at::kCPU).contiguous();
    const uint64_t bytes = c.numel() * c.element_size();
    header[name] = {{"dtype", safetensors_dtype_name(c.scalar_type())}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    cpu.push_back(c);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned, as the format recommends
  const uint64_t n = text.size();
  DurableFile f(path);
  f.write(&n, 8);
  f.write(text.data(), text.size());
  for (const auto& c : cpu) f.write(c.data_ptr(), c.numel() * c.element_size());
  f.close();
}

SafetensorsFile read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad_file(path, "cannot be opened");
  const Header h = read_header(path, in);
  SafetensorsFile out;
  out.metadata = h.metadata;
  for (const auto& e : h.tensors) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.dtype));
    in.seekg(std::streamoff(h.data_start + e.begin));
    if (!in.read(static_cast<char*>(t.data_ptr()), std::streamsize(e.end - e.begin))) bad_file(path, "cannot read tensor '" + e.name + "'");
    out.tensors[e.name] = t;
  }
  return out;
}

std::vector<SafetensorsEntry> read_safetensors_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad_file(path, "cannot be opened");
  const Header h = read_header(path, in);
  std::vector<SafetensorsEntry> out;
  for (const auto& e : h.tensors) out.push_back({e.name, e.dtype, e.shape, h.data_start + e.begin, h.data_start + e.end});
  return out;
}

void verify_safetensors(const std::string& path, const std::function<void(const char* bytes, size_t n)>& each_block) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad_file(path, "cannot be opened");
  const Header h = read_header(path, in);
  std::vector<const TensorEntry*> in_file_order;
  for (const auto& e : h.tensors) in_file_order.push_back(&e);
  std::sort(in_file_order.begin(), in_file_order.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  // Blocks of whole elements, so each is checked as it is read, wherever in the file a tensor starts.
  constexpr size_t kBlockBytes = 8 << 20;
  std::vector<double> storage(kBlockBytes / sizeof(double));  // aligned for every dtype
  char* block = reinterpret_cast<char*>(storage.data());
  uint64_t pos = 0;
  in.seekg(0);
  auto read_until = [&](uint64_t end, const TensorEntry* tensor) {
    const bool check = tensor && at::isFloatingType(tensor->dtype);
    const size_t item = tensor ? c10::elementSize(tensor->dtype) : 1;
    while (pos < end) {
      const size_t n = size_t(std::min<uint64_t>(kBlockBytes / item * item, end - pos));
      if (!in.read(block, std::streamsize(n))) bad_file(path, "cannot be read at byte " + std::to_string(pos));
      if (each_block) each_block(block, n);
      if (check) {
        const at::Tensor finite = at::isfinite(at::from_blob(block, {int64_t(n / item)}, at::TensorOptions().dtype(tensor->dtype)));
        if (!finite.all().item<bool>()) {
          const int64_t first = int64_t((pos - h.data_start - tensor->begin) / item) + finite.logical_not().nonzero()[0][0].item<int64_t>();
          bad_file(path, "tensor '" + tensor->name + "' holds a non-finite value (NaN or infinity) at element " + std::to_string(first));
        }
      }
      pos += n;
    }
  };
  for (const TensorEntry* e : in_file_order) {
    read_until(h.data_start + e->begin, nullptr);
    read_until(h.data_start + e->end, e);
  }
  read_until(h.file_size, nullptr);
}

}  // namespace dtrain
