// The safetensors format (huggingface/safetensors): an 8-byte little-endian header length, a JSON
// header mapping each tensor name to {dtype, shape, data_offsets} plus an optional string map
// "__metadata__", then the raw little-endian bytes. Loading never runs code, unlike pickles.
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dtrain {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Writes (and fsyncs) `path`. Tensors may live on any device; they are copied to the CPU.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});

struct SafetensorsFile {
  std::map<std::string, at::Tensor> tensors;  // CPU tensors
  std::map<std::string, std::string> metadata;
};

// Reads a whole file. Throws std::runtime_error naming the file and what is wrong (bad header,
// unknown dtype, a tensor whose bytes run past the end of the file).
SafetensorsFile read_safetensors(const std::string& path);

// The format's dtype names ("F32", "BF16", ...): the name of `t` (throws for a type the format
// lacks), and the type of `name` (nullopt for an unknown one).
std::string safetensors_dtype_name(at::ScalarType t);
std::optional<at::ScalarType> safetensors_dtype(const std::string& name);

// One tensor's entry in a file's header; `begin` and `end` are byte offsets in the file.
struct SafetensorsEntry {
  std::string name;
  at::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

// Reads and checks the header alone (every entry well formed, its bytes inside the file, no two
// overlapping): what a reader needs to fetch single tensors, or parts of them, from the file.
std::vector<SafetensorsEntry> read_safetensors_header(const std::string& path);

// read_safetensors_header() for its checks alone.
void verify_safetensors(const std::string& path);

}  // namespace dtrain
