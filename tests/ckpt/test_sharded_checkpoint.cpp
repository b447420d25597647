// Sharded checkpoints: chunks written by several "ranks" under one layout read back under another,
// and an index that misses or doubles elements refused by name.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <filesystem>
#include <fstream>

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
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string gap = message([] { write_checkpoint("sharded_gap", {{0, 12}, {13, 22}}); });
  EXPECT_TRUE(contains(gap, "tensor 'weight': no chunk holds elements 12..12")) << gap;
  const std::string twice = message([] { write_checkpoint("sharded_twice", {{0, 13}, {12, 23}}); });
  EXPECT_TRUE(contains(twice, "tensor 'weight': elements from 12 are held by two chunks")) << twice;

  // An index edited afterwards fails when opened, naming the tensor.
  const std::string dir = write_checkpoint("sharded_edited", {{0, 20}, {20, 15}});
  std::string text = read_text_file(dir + "/index.json");
  text.replace(text.find("\"offset\": 20"), 12, "\"offset\": 21");
  std::ofstream(dir + "/index.json", std::ios::trunc) << text;
  const std::string edited = message([&] { ShardedCheckpointReader{dir}; });
  EXPECT_TRUE(contains(edited, "index.json' has a malformed entry for 'weight': no chunk holds elements 20..20")) << edited;
  const std::string missing = message([] { ShardedCheckpointReader{scratch_dir("sharded_none")}; });
  EXPECT_TRUE(contains(missing, "index.json' is missing")) << missing;
}

// A shard cut short after the index was written (a checkpoint whose manifest was rewritten to match):
// the read names the file and the tensor rather than returning short data.
TEST(ShardedCheckpoint, ATruncatedShardIsNamedWhenRead) {
  const std::string dir = write_checkpoint("sharded_truncated", {{0, 20}, {20, 15}});
  fs::resize_file(dir + "/shard-00001.safetensors", fs::file_size(dir + "/shard-00001.safetensors") - 8);
  ShardedCheckpointReader ckpt(dir);
  at::Tensor out = torch::empty({20});
  ckpt.read("weight", 0, out);  // rank 0's file is whole
  try {
    ckpt.read("weight");
    ADD_FAILURE() << "a short read was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "shard-00001.safetensors' is truncated or unreadable where 'weight' should be")) << e.what();
  }
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
