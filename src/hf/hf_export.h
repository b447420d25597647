// Export of a dtrain checkpoint as a Hugging Face model directory that transformers'
// from_pretrained loads: config.json, generation_config.json and the weights, in model.safetensors
// or, above a size limit, in shards with model.safetensors.index.json, named as transformers names
// them. Tensors stream from the checkpoint's chunks to the output one Hugging Face tensor at a time
// (GPT-2's c_attn is its q, k and v read and fused on the way), so an export holds the largest
// tensor, never the model. Everything is written into a temporary directory beside the output and
// renamed into place at the end: an export that fails leaves nothing.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>

namespace dtrain {

struct HfExportOptions {
  at::ScalarType dtype = at::kFloat;            // of the stored weights: fp32, bf16 or fp16
  uint64_t max_shard_bytes = 5000000000;        // transformers' default "5GB", in decimal units as it counts
  std::function<void(const std::string&)> progress;  // a line now and then, and one per file
};

// Exports the checkpoint step directory `checkpoint` into `out`, which must not exist or be an
// empty directory. Throws std::runtime_error naming the directory at fault before writing anything
// when `checkpoint` has no index.json, holds a vision-language model (arch vlm) or `out` is not empty; the tokenizer files (tokenizer.json,
// tokenizer.model, tokenizer_config.json, special_tokens_map.json) found beside the run's training
// data (its config's data.source) are copied along.
void export_hf_checkpoint(const std::string& checkpoint, const std::string& out, const HfExportOptions& options);

// --dtype's names: "fp32", "bf16", "fp16"; throws std::invalid_argument naming the flag otherwise.
at::ScalarType parse_export_dtype(const std::string& name);
// --max-shard-size's: a whole number of bytes with an optional unit, "5GB", "500MB", "2GiB", "100000".
// Throws std::invalid_argument naming the flag for anything else, or zero.
uint64_t parse_byte_size(const std::string& text);

}  // namespace dtrain
