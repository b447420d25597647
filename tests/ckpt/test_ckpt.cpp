#include <gtest/gtest.h>
#include <torch/types.h>

#include <filesystem>
#include <fstream>

#include "ckpt/checkpoint_manager.h"
#include "support/scratch.h"
#include "ckpt/durable_file.h"
#include "ckpt/safetensors.h"

using namespace dtrain;
using dtrain::test::scratch_dir;
namespace fs = std::filesystem;

namespace {

void truncate_file(const std::string& path, uintmax_t by) { fs::resize_file(path, fs::file_size(path) - by); }

}  // namespace

TEST(Safetensors, RoundTripsDtypesShapesAndMetadata) {
  const auto dir = scratch_dir("ckpt_rt");
  NamedTensors in = {{"a", torch::randn({3, 4})},
                     {"b", torch::arange(0, 5, torch::kLong)},
                     {"c", torch::tensor({true, false})},
                     {"d", torch::randn({2}, torch::kDouble)},
                     {"scalar", torch::scalar_tensor(7, torch::kInt)},
                     {"bf", torch::ones({3}, torch::kBFloat16)}};
  write_safetensors(dir + "/x.safetensors", in, {{"k", "v"}});
  const auto out = read_safetensors(dir + "/x.safetensors");
  EXPECT_EQ(out.metadata.at("k"), "v");
  for (const auto& [name, t] : in) {
    ASSERT_TRUE(out.tensors.count(name)) << name;
    EXPECT_EQ(out.tensors.at(name).scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(torch::equal(out.tensors.at(name), t)) << name;
  }
  // The header the format defines: 8-byte length, then JSON starting with '{'.
  std::ifstream f(dir + "/x.safetensors", std::ios::binary);
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(f.get(), '{');
}

TEST(Safetensors, ATruncatedFileNamesTheTensorAndTheFile) {
  const auto dir = scratch_dir("ckpt_trunc");
  write_safetensors(dir + "/m.safetensors", {{"first", torch::ones({4})}, {"second", torch::ones({100})}});
  truncate_file(dir + "/m.safetensors", 10);
  try {
    read_safetensors(dir + "/m.safetensors");
    FAIL();
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("m.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'second'"), std::string::npos) << msg;
  }
  EXPECT_THROW(verify_safetensors(dir + "/m.safetensors"), std::runtime_error);
  std::ofstream(dir + "/junk.safetensors") << "not a tensor file at all";
  EXPECT_THROW(read_safetensors(dir + "/junk.safetensors"), std::runtime_error);
}

TEST(CheckpointManager, CommitsAtomicallyKeepsTheNewestAndPointsLatest) {
  const auto dir = scratch_dir("ckpt_mgr");
  CheckpointOptions o;
  o.dir = dir;
  o.keep = 2;
  CheckpointManager m(o, 0, [] {});
  for (int64_t step : {10, 20, 30}) {
    m.save(step, 0, [&](const std::string& tmp) {
      EXPECT_TRUE(tmp.size() > 4 && tmp.substr(tmp.size() - 4) == ".tmp");
      write_safetensors(tmp + "/model.safetensors", {{"w", torch::full({3}, double(step))}});
    });
  }
  EXPECT_FALSE(fs::exists(dir + "/step-00000010"));  // pruned: keep 2
  EXPECT_TRUE(fs::exists(dir + "/step-00000020/manifest.json"));
  EXPECT_EQ(read_text_file(dir + "/latest"), "step-00000030\n");
  EXPECT_EQ(CheckpointManager::step_of(dir + "/step-00000030"), 30);
  // An uncommitted directory (a crash mid-save) is never a candidate.
  fs::create_directories(dir + "/step-00000040.tmp");
  EXPECT_EQ(*m.find_resumable(nullptr), dir + "/step-00000030");
}

TEST(CheckpointManager, ADamagedLatestFallsBackToThePreviousOneWithAWarning) {
  const auto dir = scratch_dir("ckpt_fallback");
  CheckpointOptions o;
  o.dir = dir;
  CheckpointManager m(o, 0, [] {});
  for (int64_t step : {1, 2})
    m.save(step, 0, [&](const std::string& tmp) { write_safetensors(tmp + "/model.safetensors", {{"w", torch::ones({64})}}); });
  truncate_file(dir + "/step-00000002/model.safetensors", 8);
  std::vector<std::string> warnings;
  EXPECT_EQ(*m.find_resumable(&warnings), dir + "/step-00000001");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("step-00000002/model.safetensors"), std::string::npos) << warnings[0];
  truncate_file(dir + "/step-00000001/model.safetensors", 8);
  EXPECT_FALSE(m.find_resumable(nullptr).has_value());
}

TEST(CheckpointManager, DueBySteptimeAndEnd) {
  CheckpointOptions o;
  o.dir = "unused";
  o.every_steps = 5;
  o.every_hours = 1.0;
  CheckpointManager m(o, 0, [] {});
  EXPECT_TRUE(m.due(10, false, 0));
  EXPECT_FALSE(m.due(11, false, 0.5));
  EXPECT_TRUE(m.due(11, false, 1.0));
  EXPECT_TRUE(m.due(12, true, 0));
}
