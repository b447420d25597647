#include "ckpt/safetensors_writer.h"

#include <nlohmann/json.hpp>

#include <stdexcept>

#include "ckpt/safetensors.h"

namespace dtrain {

uint64_t SafetensorsSpec::bytes() const {
  uint64_t n = c10::elementSize(dtype);
  for (const int64_t d : shape) n *= uint64_t(d);
  return n;
}

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<SafetensorsSpec> tensors, const std::map<std::string, std::string>& metadata)
    : path_(path), tensors_(std::move(tensors)), file_(path) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsSpec& t : tensors_) {
    header[t.name] = {{"dtype", safetensors_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes()}}};
    offset += t.bytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned, as the format recommends
  const uint64_t n = text.size();
  file_.write(&n, 8);
  file_.write(text.data(), text.size());
}

void SafetensorsWriter::write(const at::Tensor& t) {
  if (next_ >= tensors_.size()) throw std::logic_error(path_ + ": a tensor written after the last one its header names");
  const SafetensorsSpec& spec = tensors_[next_];
  if (t.scalar_type() != spec.dtype || t.sizes().vec() != spec.shape)
    throw std::logic_error(path_ + ": tensor '" + spec.name + "' written with another dtype or shape than its header's");
  const at::Tensor c = t.detach().to(at::kCPU).contiguous();
  file_.write(c.data_ptr(), spec.bytes());
  ++next_;
}

void SafetensorsWriter::close() {
  if (next_ != tensors_.size())
    throw std::logic_error(path_ + ": closed after " + std::to_string(next_) + " of its " + std::to_string(tensors_.size()) + " tensors");
  file_.close();
}

}  // namespace dtrain
