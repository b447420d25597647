#include "ckpt/safetensors.h"

#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <cstring>
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

std::string dtype_to_name(at::ScalarType t) {
  for (const auto& [name, type] : dtype_names())
    if (type == t) return name;
  throw std::runtime_error(std::string("safetensors cannot store dtype ") + c10::toString(t));
}

[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
  throw std::runtime_error("safetensors file '" + path + "': " + what);
}

struct Header {
  nlohmann::json json;
  uint64_t data_start = 0;
  uint64_t file_size = 0;
};

Header read_header(const std::string& path, std::ifstream& in) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) bad_file(path, "does not exist");
  Header h;
  h.file_size = uint64_t(st.st_size);
  uint64_t n = 0;
  if (h.file_size < 8 || !in.read(reinterpret_cast<char*>(&n), 8)) bad_file(path, "is shorter than its 8-byte header length");
  if (n > h.file_size - 8) bad_file(path, "is truncated: its header alone needs " + std::to_string(n + 8) + " bytes, the file has " + std::to_string(h.file_size));
  std::string text(n, '\0');
  in.read(text.data(), std::streamsize(n));
  try {
    h.json = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    bad_file(path, std::string("header is not valid JSON (") + e.what() + ")");
  }
  h.data_start = 8 + n;
  for (auto it = h.json.begin(); it != h.json.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& off = it.value().at("data_offsets");
    const uint64_t end = off.at(1).get<uint64_t>();
    if (h.data_start + end > h.file_size)
      bad_file(path, "is truncated: tensor '" + it.key() + "' needs bytes up to " + std::to_string(h.data_start + end) +
                         ", the file has " + std::to_string(h.file_size));
  }
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
    header[name] = {{"dtype", dtype_to_name(c.scalar_type())}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
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
  Header h = read_header(path, in);
  SafetensorsFile out;
  for (auto it = h.json.begin(); it != h.json.end(); ++it) {
    if (it.key() == "__metadata__") {
      for (auto m = it.value().begin(); m != it.value().end(); ++m) out.metadata[m.key()] = m.value().get<std::string>();
      continue;
    }
    const auto& spec = it.value();
    const std::string dtype = spec.at("dtype");
    at::ScalarType type = at::kFloat;
    bool known = false;
    for (const auto& [name, t] : dtype_names())
      if (name == dtype) { type = t; known = true; }
    if (!known) bad_file(path, "tensor '" + it.key() + "' has unsupported dtype " + dtype);
    const auto shape = spec.at("shape").get<std::vector<int64_t>>();
    const uint64_t begin = spec.at("data_offsets").at(0), end = spec.at("data_offsets").at(1);
    at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type));
    if (uint64_t(t.numel() * t.element_size()) != end - begin)
      bad_file(path, "tensor '" + it.key() + "' has " + std::to_string(end - begin) + " bytes for its shape and dtype");
    in.seekg(std::streamoff(h.data_start + begin));
    if (!in.read(static_cast<char*>(t.data_ptr()), std::streamsize(end - begin))) bad_file(path, "cannot read tensor '" + it.key() + "'");
    out.tensors[it.key()] = t;
  }
  return out;
}

void verify_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad_file(path, "cannot be opened");
  read_header(path, in);
}

}  // namespace dtrain
