// A safetensors file written one tensor at a time: the header, which needs every tensor's dtype and
// shape, goes first, then each tensor's bytes as the caller produces it, so a writer of a large
// model holds one tensor at a time, never the model.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ckpt/durable_file.h"

namespace dtrain {

struct SafetensorsSpec {
  std::string name;
  at::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t bytes() const;
};

class SafetensorsWriter {
 public:
  // Creates `path` and writes the header of `tensors`, in that order, with `metadata`.
  SafetensorsWriter(const std::string& path, std::vector<SafetensorsSpec> tensors, const std::map<std::string, std::string>& metadata = {});
  // The next tensor, of its spec's dtype and shape (any device); throws std::logic_error otherwise.
  void write(const at::Tensor& t);
  // Flushes and fsyncs, once every tensor is written; throws std::logic_error before.
  void close();

 private:
  std::string path_;
  std::vector<SafetensorsSpec> tensors_;
  size_t next_ = 0;
  DurableFile file_;
};

}  // namespace dtrain
