// The safetensors format (huggingface/safetensors): an 8-byte little-endian header length, a JSON
// header mapping each tensor name to {dtype, shape, data_offsets} plus an optional string map
// "__metadata__", then the raw little-endian bytes. Loading never runs code, unlike pickles.
#pragma once
#include <ATen/ATen.h>

#include <map>
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

// Checks the header (every entry well formed, its bytes inside the file, no two overlapping) without
// reading the tensors.
void verify_safetensors(const std::string& path);

}  // namespace dtrain
