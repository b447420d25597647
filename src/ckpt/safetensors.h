// The safetensors format (huggingface/safetensors): an 8-byte little-endian header length, a JSON
// header mapping each tensor name to {dtype, shape, data_offsets} plus an optional string map
// "__metadata__", then the raw little-endian bytes. Loading never runs code, unlike pickles.
#pragma once
#include <ATen/ATen.h>

#include <cstddef>
#include <functional>
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

// Reads the whole file once, in order, and checks it: the header as read_safetensors_header() does,
// and every floating-point tensor for NaN and infinity (one isfinite pass per block read), since
// such a value in stored weights poisons whatever loads them. Throws naming the file and the tensor
// at fault. Every byte also goes to `each_block`, so a caller can checksum the file in the same read.
void verify_safetensors(const std::string& path, const std::function<void(const char* bytes, size_t n)>& each_block = {});

}  // namespace dtrain
