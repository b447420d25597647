#include "hf/hf_export.h"

#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <stdexcept>

#include "ckpt/durable_file.h"
#include "ckpt/safetensors_writer.h"
#include "ckpt/sharded_checkpoint.h"
#include "ckpt/training_checkpoint.h"
#include "common/printable.h"
#include "hf/hf_checkpoint_reader.h"
#include "hf/hf_config.h"
#include "hf/hf_tensor_map.h"

namespace dtrain {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string gigabytes(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, bytes >= 100000000 ? "%.2f GB" : "%.3f MB", double(bytes) / (bytes >= 100000000 ? 1e9 : 1e6));
  return text;
}

// The files of each shard, in order: tensors in export order, a new file when the next tensor
// would take this one past `limit` (a tensor larger than the limit gets a file of its own, as
// transformers does).
std::vector<std::vector<SafetensorsSpec>> plan_shards(const std::vector<HfTensor>& tensors, at::ScalarType dtype, uint64_t limit) {
  std::vector<std::vector<SafetensorsSpec>> files(1);
  uint64_t in_file = 0;
  for (const HfTensor& t : tensors) {
    const SafetensorsSpec spec{t.name, dtype, t.shape};
    if (in_file > 0 && in_file + spec.bytes() > limit) {
      files.emplace_back();
      in_file = 0;
    }
    files.back().push_back(spec);
    in_file += spec.bytes();
  }
  return files;
}

std::string shard_name(size_t i, size_t n) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return name;
}

// The Hugging Face tensor `t`, from its dtrain parts read whole and stacked, in `dtype`.
at::Tensor hf_tensor(ShardedCheckpointReader& ckpt, const HfTensor& t, at::ScalarType dtype) {
  std::vector<at::Tensor> parts;
  for (const std::string& p : t.parts) parts.push_back(ckpt.read("model/" + p));
  at::Tensor whole = parts.size() == 1 ? parts.front() : at::cat(parts, 0);
  if (t.transposed) whole = whole.t();
  return whole.to(dtype).contiguous();
}

// The run's data section, from the checkpoint's config.json; empty without one.
json data_config(const std::string& checkpoint) {
  const std::string path = checkpoint + "/config.json";
  if (!fs::exists(path)) return json::object();
  return read_json_file(path).value("data", json::object());
}

// The directory the run's training data lies in (data.source "bin:GLOB", "text:PATH"); empty for
// the built-in data.
std::string data_dir(const json& data) {
  const json source = data.value("source", json());
  if (!source.is_string()) return "";
  const std::string s = source.get<std::string>();
  const size_t colon = s.find(':');
  if (colon == std::string::npos) return "";
  const fs::path path = s.substr(colon + 1);
  return fs::is_directory(path) ? path.string() : path.parent_path().string();
}

// The tokenizer the run trained with (data.tokenizer), under the name Hugging Face gives it, and the
// files Hugging Face keeps beside it; without one, those found beside the training data.
void copy_tokenizer_files(const std::string& checkpoint, const std::string& out, const HfExportOptions& options) {
  const json data = data_config(checkpoint);
  const std::string named = data.value("tokenizer", std::string());
  std::vector<std::pair<fs::path, std::string>> files;  // from, name in the export
  std::string dir = data_dir(data);
  if (!named.empty()) {
    if (!fs::is_regular_file(named))
      throw std::runtime_error("the checkpoint's run trained with data.tokenizer '" + printable(named) + "', which is not a file any more");
    files.emplace_back(named, fs::path(named).extension() == ".model" ? "tokenizer.model" : "tokenizer.json");
    dir = fs::path(named).parent_path().string();
  }
  if (dir.empty() && files.empty()) return;
  for (const char* file : {"tokenizer.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json"})
    if (named.empty() || std::string(file).rfind("tokenizer.", 0) != 0) files.emplace_back(fs::path(dir) / file, file);
  for (const auto& [from, name] : files) {
    if (!fs::is_regular_file(from)) continue;
    fs::copy_file(from, fs::path(out) / name);
    if (options.progress) options.progress("export: " + name + " from " + printable(from.string()));
  }
}

void write_weights(ShardedCheckpointReader& ckpt, const std::vector<HfTensor>& tensors, const std::string& tmp, const HfExportOptions& options) {
  const auto files = plan_shards(tensors, options.dtype, options.max_shard_bytes);
  uint64_t total = 0, done = 0;
  for (const auto& file : files)
    for (const auto& spec : file) total += spec.bytes();
  json weight_map = json::object();
  size_t next = 0, written = 0;
  int reported_tenth = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    const std::string name = files.size() == 1 ? kHfWeightsFile : shard_name(f, files.size());
    SafetensorsWriter writer(tmp + "/" + name, files[f], {{"format", "pt"}});
    for (const SafetensorsSpec& spec : files[f]) {
      writer.write(hf_tensor(ckpt, tensors[next++], options.dtype));
      weight_map[spec.name] = name;
      done += spec.bytes();
      ++written;
      // A line per tenth of the bytes: a 1B model's export takes a while.
      if (options.progress && total > 0 && int(done * 10 / total) > reported_tenth && done < total) {
        reported_tenth = int(done * 10 / total);
        options.progress("export: " + gigabytes(done) + " of " + gigabytes(total) + ", " + std::to_string(written) + " of " +
                         std::to_string(tensors.size()) + " tensors");
      }
    }
    writer.close();
    if (options.progress) options.progress("export: wrote " + name);
  }
  if (files.size() > 1)
    write_file_atomically(tmp + "/" + kHfWeightsIndexFile, json({{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}).dump(2));
}

}  // namespace

at::ScalarType parse_export_dtype(const std::string& name) {
  if (name == "fp32") return at::kFloat;
  if (name == "bf16") return at::kBFloat16;
  if (name == "fp16") return at::kHalf;
  throw std::invalid_argument("--dtype must be fp32, bf16 or fp16, got \"" + printable(name) + "\"");
}

uint64_t parse_byte_size(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const std::string unit = text.substr(digits);
  const std::pair<const char*, uint64_t> units[] = {{"", 1}, {"B", 1}, {"KB", 1000}, {"MB", 1000000}, {"GB", 1000000000},
                                                    {"KiB", 1024}, {"MiB", 1 << 20}, {"GiB", 1 << 30}};
  for (const auto& [name, scale] : units) {
    if (digits == 0 || digits > 15 || unit != name) continue;
    const uint64_t bytes = std::stoull(text.substr(0, digits)) * scale;
    if (bytes > 0) return bytes;
  }
  throw std::invalid_argument("--max-shard-size must be a positive size such as 5GB, 500MB or 2GiB, got \"" + printable(text) + "\"");
}

void export_hf_checkpoint(const std::string& checkpoint, const std::string& out, const HfExportOptions& options) {
  if (!fs::exists(checkpoint + "/" + kCheckpointIndexFile))
    throw std::runtime_error("checkpoint " + printable(checkpoint) + " has no " + kCheckpointIndexFile +
                             ": it is not a dtrain checkpoint's step directory (such as ckpt/step-00000100)");
  if (fs::exists(out) && !(fs::is_directory(out) && fs::is_empty(out)))
    throw std::runtime_error("--out " + printable(out) + " exists and is not an empty directory: an export writes a directory of its own");
  ShardedCheckpointReader ckpt(checkpoint);
  const TransformerConfig config = transformer_config_from_json(model_config_of(ckpt));
  if (config.is_vlm())
    throw std::runtime_error("checkpoint " + printable(checkpoint) + " holds a vision-language model (model.arch \"vlm\"): the Hugging Face " +
                             "export writes GPT-2 and Llama models only");
  const std::vector<HfTensor> tensors = hf_tensors(config, config.seq_len);
  const fs::path target = fs::absolute(out).lexically_normal();
  const std::string tmp = (target.parent_path() / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()))).string();
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  try {
    write_weights(ckpt, tensors, tmp, options);
    json hf = hf_config(config);
    hf["torch_dtype"] = options.dtype == at::kFloat ? "float32" : options.dtype == at::kBFloat16 ? "bfloat16" : "float16";
    write_file_atomically(tmp + "/" + kHfConfigFile, hf.dump(2));
    write_file_atomically(tmp + "/generation_config.json", hf_generation_config(config).dump(2));
    copy_tokenizer_files(checkpoint, tmp, options);
    fsync_directory(tmp);
    fs::rename(tmp, target);  // over an empty directory too
    fsync_directory(target.parent_path().string());
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    throw;
  }
}

}  // namespace dtrain
