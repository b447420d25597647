// Sharded checkpoints: chunks written by several "ranks" under one layout read back under another,
// and an index that misses or doubles elements, or disagrees with the shard files, refused by name.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ckpt/durable_file.h"
#include "ckpt/sharded_checkpoint.h"
#include "support/scratch.h"

using namespace dtrain;
using dtrain::test::scratch_dir;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// `weight` (5 x 7) cut into the flat ranges of `cuts` (one rank each, as ZeRO cuts it), a bf16 bias
// held whole by rank 0 and a scalar step count.
const at::Tensor kWeight = torch::arange(0, 35, torch::kFloat).reshape({5, 7});
const at::Tensor kBias = torch::linspace(-1, 1, 6).to(torch::kBFloat16);

std::map<std::string, GlobalTensor> globals() {
  return {{"weight", {{5, 7}, at::kFloat}}, {"bias", {{6}, at::kBFloat16}}, {"step", {{}, at::kLong}}};
}

std::string write_checkpoint(const std::string& name, const std::vector<std::pair<int64_t, int64_t>>& cuts) {
  const std::string dir = scratch_dir(name);
  for (size_t r = 0; r < cuts.size(); ++r) {
    std::vector<TensorChunk> chunks = {{"weight", cuts[r].first, kWeight.view({-1}).narrow(0, cuts[r].first, cuts[r].second)}};
    if (r == 0) {
      chunks.push_back({"bias", 0, kBias});
      chunks.push_back({"step", 0, torch::tensor({int64_t(12)})});
    }
    write_shard_file(dir, int(r), chunks);
  }
  write_checkpoint_index(dir, globals(), {{"note", "test"}});
  return dir;
}

// What `f` throws; "no error" when it returns.
std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(ShardedCheckpoint, AnyRangeReadsBackWhateverCutWroteIt) {
  const std::string dir = write_checkpoint("sharded_rt", {{0, 12}, {12, 12}, {24, 11}});
  ShardedCheckpointReader ckpt(dir);
  EXPECT_EQ(ckpt.metadata()["note"], "test");
  EXPECT_EQ(ckpt.tensors().size(), 3u);
  EXPECT_TRUE(torch::equal(ckpt.read("weight"), kWeight));
  EXPECT_TRUE(torch::equal(ckpt.read("bias"), kBias));
  EXPECT_EQ(ckpt.read("step").item<int64_t>(), 12);
  EXPECT_EQ(ckpt.read("step").dim(), 0);
  // Every range a reader with another number of ranks could ask for, across chunk boundaries.
  for (int64_t from = 0; from < 35; ++from)
    for (int64_t n = 1; from + n <= 35; n += 3) {
      at::Tensor out = torch::full({n}, -1.0);
      ckpt.read("weight", from, out);
      EXPECT_TRUE(torch::equal(out, kWeight.view({-1}).narrow(0, from, n))) << from << "+" << n;
    }
  EXPECT_THROW(ckpt.read("weight", 30, torch::empty({6})), std::runtime_error);
  EXPECT_THROW(ckpt.read("nothing"), std::runtime_error);
}

TEST(ShardedCheckpoint, AnIndexIsRefusedUnlessEveryElementIsHeldExactlyOnce) {
  const std::string gap = error_message([] { write_checkpoint("sharded_gap", {{0, 12}, {13, 22}}); });
  EXPECT_TRUE(contains(gap, "tensor 'weight': no chunk holds elements 12..12")) << gap;
  const std::string twice = error_message([] { write_checkpoint("sharded_twice", {{0, 13}, {12, 23}}); });
  EXPECT_TRUE(contains(twice, "tensor 'weight': elements from 12 are held by two chunks")) << twice;

  // An index edited afterwards fails when opened, naming the tensor.
  const std::string dir = write_checkpoint("sharded_edited", {{0, 20}, {20, 15}});
  std::string text = read_text_file(dir + "/index.json");
  text.replace(text.find("\"offset\": 20"), 12, "\"offset\": 21");
  std::ofstream(dir + "/index.json", std::ios::trunc) << text;
  const std::string edited = error_message([&] { ShardedCheckpointReader{dir}; });
  EXPECT_TRUE(contains(edited, "index.json' has a malformed entry for 'weight': no chunk holds elements 20..20")) << edited;
  const std::string missing = error_message([] { ShardedCheckpointReader{scratch_dir("sharded_none")}; });
  EXPECT_TRUE(contains(missing, "index.json' is missing")) << missing;
}

// A shard cut short after the index was written (a checkpoint whose manifest was rewritten to match):
// opening the checkpoint names the file and the chunk, which checking the index against the shard
// headers reads, rather than a read returning short data.
TEST(ShardedCheckpoint, ATruncatedShardIsNamedWhenOpened) {
  const std::string dir = write_checkpoint("sharded_truncated", {{0, 20}, {20, 15}});
  fs::resize_file(dir + "/shard-00001.safetensors", fs::file_size(dir + "/shard-00001.safetensors") - 8);
  const std::string error = error_message([&] { ShardedCheckpointReader{dir}; });
  EXPECT_TRUE(contains(error, "shard-00001.safetensors': tensor 'weight@20'")) << error;
}

// index.json says where each chunk's bytes lie, and readers used to trust it: with one chunk's
// byte_offset moved by an element, or two same-shaped tensors' offsets swapped (and the manifest
// entry rewritten to match), a checkpoint loaded other bytes as the tensor without a word. Opening it
// now compares every chunk with its shard's header and names the tensor that disagrees.
TEST(ShardedCheckpoint, AnIndexWhoseByteOffsetsDisagreeWithTheShardHeadersIsRefused) {
  const std::string dir = scratch_dir("sharded_offsets");
  const std::map<std::string, GlobalTensor> tensors = {{"a", {{8}, at::kFloat}}, {"b", {{8}, at::kFloat}}, {"c", {{8}, at::kFloat}}};
  write_shard_file(dir, 0, {{"a", 0, torch::arange(0, 8, torch::kFloat)}, {"b", 0, torch::arange(8, 16, torch::kFloat)},
                            {"c", 0, torch::arange(16, 24, torch::kFloat)}});
  write_checkpoint_index(dir, tensors, {});
  const nlohmann::json original = nlohmann::json::parse(read_text_file(dir + "/index.json"));
  EXPECT_TRUE(torch::equal(ShardedCheckpointReader(dir).read("b"), torch::arange(8, 16, torch::kFloat)));
  auto open_edited = [&](const std::function<void(nlohmann::json& index)>& edit) {
    nlohmann::json index = original;
    edit(index);
    write_file_atomically(dir + "/index.json", index.dump(1));
    return error_message([&] { ShardedCheckpointReader{dir}; });
  };
  auto byte_offset = [](nlohmann::json& index, const std::string& tensor) -> nlohmann::json& {
    return index["tensors"][tensor]["chunks"][0]["byte_offset"];
  };
  const uint64_t b_at = original["tensors"]["b"]["chunks"][0]["byte_offset"].get<uint64_t>();
  const std::string shifted = open_edited([&](nlohmann::json& index) { byte_offset(index, "b") = b_at + 4; });
  EXPECT_TRUE(contains(shifted, "index.json' disagrees with '" + dir + "/shard-00000.safetensors' about tensor 'b'")) << shifted;
  EXPECT_TRUE(contains(shifted, "the index says byte offset " + std::to_string(b_at + 4) + ", the file's header " + std::to_string(b_at)))
      << shifted;
  const std::string swapped = open_edited([&](nlohmann::json& index) { std::swap(byte_offset(index, "a"), byte_offset(index, "c")); });
  EXPECT_TRUE(contains(swapped, "about tensor 'a' (its chunk from element 0): the index says byte offset")) << swapped;
  const std::string retyped = open_edited([&](nlohmann::json& index) { index["tensors"]["c"]["dtype"] = "I32"; });
  EXPECT_TRUE(contains(retyped, "about tensor 'c' (its chunk from element 0): the index says Int, the file Float")) << retyped;
}

TEST(ShardedCheckpoint, AChunkOfAnUnknownTensorOrTypeIsNamed) {
  const std::string dir = scratch_dir("sharded_unknown");
  write_shard_file(dir, 0, {{"weight", 0, kWeight.view({-1})}, {"bias", 0, kBias.to(at::kFloat)}, {"step", 0, torch::tensor({int64_t(1)})}});
  try {
    write_checkpoint_index(dir, globals(), {});
    ADD_FAILURE() << "a float chunk of a bf16 tensor was indexed";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "shard-00000.safetensors: chunk 'bias@0' is Float, the tensor is BFloat16")) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir + "/index.json"));
}
