#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <functional>

#include "ckpt/checkpoint_manager.h"
#include "ckpt/directory_lock.h"
#include "ckpt/durable_file.h"
#include "ckpt/safetensors.h"
#include "support/scratch.h"
#include "support/small_tmpfs.h"

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

namespace {

const CheckpointHealth kHealthy{true, ""};

void save_steps(CheckpointManager& m, const std::vector<int64_t>& steps, const CheckpointHealth& health = kHealthy) {
  for (int64_t step : steps)
    m.save(step, 0, health, [&](const std::string& tmp) {
      write_safetensors(tmp + "/model.safetensors", {{"w", torch::full({64}, double(step))}});
    });
}

CheckpointManager manager(const std::string& dir, int keep = 0) {
  CheckpointOptions o;
  o.dir = dir;
  o.keep = keep;
  return CheckpointManager(o, 0, agree_alone());
}

std::string expect_throws(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

// Overwrites bytes at `offset` with `text`, keeping the file's size.
void patch_file(const std::string& path, std::streamoff offset, const std::string& text) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset);
  f.write(text.data(), std::streamsize(text.size()));
}

std::string tensor_file(const std::string& dir, const std::string& header) {
  const std::string path = dir + "/h.safetensors";
  std::ofstream f(path, std::ios::binary);
  const uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header << std::string(64, '\0');
  return path;
}

}  // namespace

TEST(Safetensors, EveryHeaderEntryIsCheckedBeforeItIsUsed) {
  const auto dir = scratch_dir("ckpt_header");
  struct Case {
    std::string header, needle;
  };
  const std::vector<Case> cases = {
      {R"([1,2])", "not a JSON object"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", "'a' and 'b' overlap"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", "'a' has data_offsets that end before they begin"},
      {R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "'a' has 8 bytes, its shape and dtype need 12"},
      {R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", "'a' has unsupported dtype \"Q4\""},
      {R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", "'a' has a shape entry that is not a size"},
      {R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", "'a' has a shape larger than the file"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,99999]}})", "tensor 'a' needs 99999 data bytes, the file has 64"},
      {R"({"a":{"dtype":"F32","shape":[2]}})", "'a' must be an object with dtype, shape and data_offsets"},
      {R"({"__metadata__":{"k":1}})", "__metadata__ entry 'k' is not a string"},
  };
  for (const auto& c : cases) {
    const std::string msg = expect_throws([&] { read_safetensors(tensor_file(dir, c.header)); });
    EXPECT_NE(msg.find(c.needle), std::string::npos) << c.header << " -> " << msg;
    EXPECT_NE(msg.find("h.safetensors"), std::string::npos) << msg;
  }
  // A header length near 2^64 is refused as it is, without overflowing arithmetic in the message.
  const std::string path = dir + "/huge.safetensors";
  {
    std::ofstream f(path, std::ios::binary);
    const uint64_t n = ~uint64_t(0);
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << "{}";
  }
  const std::string msg = expect_throws([&] { verify_safetensors(path); });
  EXPECT_NE(msg.find("claims a header of 18446744073709551615 bytes"), std::string::npos) << msg;
}

TEST(CheckpointManager, CommitsAtomicallyKeepsTheNewestAndPointsLatest) {
  const auto dir = scratch_dir("ckpt_mgr");
  auto m = manager(dir, 2);
  for (int64_t step : {10, 20, 30}) {
    m.save(step, 0, kHealthy, [&](const std::string& tmp) {
      EXPECT_TRUE(tmp.size() > 4 && tmp.substr(tmp.size() - 4) == ".tmp");
      write_safetensors(tmp + "/model.safetensors", {{"w", torch::full({3}, double(step))}});
    });
  }
  EXPECT_FALSE(fs::exists(dir + "/step-00000010"));  // pruned: keep 2
  EXPECT_TRUE(fs::exists(dir + "/step-00000020/manifest.json"));
  EXPECT_EQ(read_text_file(dir + "/latest"), "step-00000030\n");
  EXPECT_EQ(CheckpointManager::verify(dir + "/step-00000030").step, 30);
  // An uncommitted directory (a crash mid-save) is never a candidate, and is cleared away later.
  fs::create_directories(dir + "/step-00000040.tmp");
  EXPECT_EQ(m.find_resumable(nullptr, nullptr)->dir, dir + "/step-00000030");
  m.remove_interrupted_saves();
  EXPECT_FALSE(fs::exists(dir + "/step-00000040.tmp"));
  EXPECT_TRUE(fs::exists(dir + "/step-00000030"));
}

TEST(CheckpointManager, ADamagedCheckpointFallsBackToThePreviousOneWithAWarning) {
  const auto dir = scratch_dir("ckpt_fallback");
  auto m = manager(dir);
  save_steps(m, {1, 2});
  truncate_file(dir + "/step-00000002/model.safetensors", 8);
  std::vector<std::string> warnings;
  EXPECT_EQ(m.find_resumable(nullptr, &warnings)->dir, dir + "/step-00000001");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("step-00000002/model.safetensors"), std::string::npos) << warnings[0];
  truncate_file(dir + "/step-00000001/model.safetensors", 8);
  EXPECT_FALSE(m.find_resumable(nullptr, nullptr).has_value());
}

// Damage that keeps every file's size: an edited header (a shape, an offset, a name), a flipped data
// byte. The checksum in the manifest catches each; without it the size check passes them all.
TEST(CheckpointManager, SameSizeDamageIsCaughtByTheChecksum) {
  const auto dir = scratch_dir("ckpt_same_size");
  auto m = manager(dir);
  save_steps(m, {1});
  const std::string good = dir + "/step-00000001";
  for (const auto& [offset, text] : std::vector<std::pair<std::streamoff, std::string>>{{9, "x"}, {200, "\x7f"}}) {
    save_steps(m, {2});
    const std::string file = dir + "/step-00000002/model.safetensors";
    const auto size = fs::file_size(file);
    patch_file(file, std::min<std::streamoff>(offset, std::streamoff(size) - 1), text);
    ASSERT_EQ(fs::file_size(file), size);
    const std::string msg = expect_throws([&] { CheckpointManager::verify(dir + "/step-00000002"); });
    EXPECT_NE(msg.find(file + "' is damaged: its checksum does not match"), std::string::npos) << msg;
    EXPECT_EQ(m.find_resumable(nullptr, nullptr)->dir, good);
  }
}

// Weights that went NaN or infinite before they were saved carry checksums as valid as any, and a
// run resumed from them skipped every step. verify() now reads every floating-point tensor and names
// the file, the tensor and the element, so resume passes over such a checkpoint like any damaged one.
TEST(CheckpointManager, ACheckpointHoldingNaNOrInfinityIsDamaged) {
  const auto dir = scratch_dir("ckpt_non_finite");
  auto m = manager(dir);
  save_steps(m, {1});
  auto save_poisoned = [&](int64_t step, const std::string& tensor, int64_t element, float value) {
    at::Tensor values = torch::ones({3 << 20});  // 12 MiB: more than one block of the check
    values[element] = value;
    m.save(step, 0, kHealthy, [&](const std::string& tmp) {
      // A 3-element bf16 tensor first, so the fp32 one starts off its alignment in the file.
      write_safetensors(tmp + "/model.safetensors", {{"model/ln.bias@0", torch::zeros({3}, torch::kBFloat16)}, {tensor, values}});
    });
  };
  save_poisoned(2, "model/w@0", 17, NAN);                                   // a parameter
  save_poisoned(3, "optimizer/exp_avg_sq/w@0", (3 << 20) - 5, INFINITY);  // an optimizer moment, in the last block
  for (const auto& [step, needle] : std::vector<std::pair<std::string, std::string>>{
           {"step-00000002", "tensor 'model/w@0' holds a non-finite value (NaN or infinity) at element 17"},
           {"step-00000003", "tensor 'optimizer/exp_avg_sq/w@0' holds a non-finite value (NaN or infinity) at element " +
                                 std::to_string((3 << 20) - 5)}}) {
    const std::string msg = expect_throws([&] { CheckpointManager::verify(dir + "/" + step); });
    EXPECT_NE(msg.find(dir + "/" + step + "/model.safetensors': " + needle), std::string::npos) << msg;
  }
  std::vector<std::string> warnings;
  EXPECT_EQ(m.find_resumable(nullptr, &warnings)->step, 1);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("'optimizer/exp_avg_sq/w@0' holds a non-finite value"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("'model/w@0' holds a non-finite value"), std::string::npos) << warnings[1];
  // A damaged file is named damaged by its checksum first, whatever its bytes now hold.
  patch_file(dir + "/step-00000002/model.safetensors", std::streamoff(fs::file_size(dir + "/step-00000002/model.safetensors") - 4), "\x01");
  EXPECT_NE(expect_throws([&] { CheckpointManager::verify(dir + "/step-00000002"); }).find("is damaged: its checksum does not match"),
            std::string::npos);
  save_poisoned(1, "model/w@0", 0, -INFINITY);
  EXPECT_FALSE(m.find_resumable(nullptr, nullptr).has_value());
}

TEST(CheckpointManager, AManifestWhoseStepContradictsItsDirectoryIsDamaged) {
  const auto dir = scratch_dir("ckpt_step_name");
  auto m = manager(dir);
  save_steps(m, {20});
  fs::rename(dir + "/step-00000020", dir + "/step-00000099");
  const std::string msg = expect_throws([&] { CheckpointManager::verify(dir + "/step-00000099"); });
  EXPECT_NE(msg.find("says step 20 but the directory is named for step 99"), std::string::npos) << msg;
  std::ofstream(dir + "/step-00000099/manifest.json") << "[]";
  EXPECT_NE(expect_throws([&] { CheckpointManager::read_manifest(dir + "/step-00000099"); }).find("manifest.json' lacks step"),
            std::string::npos);
}

// A kill between committing step-N and rewriting `latest` leaves `latest` one behind: resume still
// takes the newest committed checkpoint.
TEST(CheckpointManager, ResumeTakesTheNewestCommittedCheckpointNotLatest) {
  const auto dir = scratch_dir("ckpt_latest");
  auto m = manager(dir);
  save_steps(m, {1, 2});
  write_file_atomically(dir + "/latest", "step-00000001\n");
  EXPECT_EQ(m.find_resumable(nullptr, nullptr)->dir, dir + "/step-00000002");
}

// A diverging run keeps saving unhealthy checkpoints; `keep` must not push out the last good one,
// and resuming prefers it.
TEST(CheckpointManager, KeepNeverDeletesTheNewestHealthyCheckpointAndResumePrefersIt) {
  const auto dir = scratch_dir("ckpt_health");
  auto m = manager(dir, 2);
  save_steps(m, {10});
  save_steps(m, {20, 30, 40}, {false, "step 21: non-finite loss"});
  EXPECT_TRUE(fs::exists(dir + "/step-00000010"));
  EXPECT_FALSE(fs::exists(dir + "/step-00000020"));
  EXPECT_TRUE(fs::exists(dir + "/step-00000040"));
  EXPECT_EQ(m.find_resumable(nullptr, nullptr, /*healthy_only=*/true)->step, 10);
  std::vector<std::string> warnings;
  EXPECT_EQ(m.find_resumable(nullptr, &warnings)->step, 10);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("step-00000040' was taken when training had gone wrong (step 21: non-finite loss)"),
            std::string::npos) << warnings[0];
  // With no healthy one left, the newest intact one is still better than nothing.
  fs::remove_all(dir + "/step-00000010");
  EXPECT_EQ(m.find_resumable(nullptr, nullptr)->step, 40);
  EXPECT_FALSE(m.find_resumable(nullptr, nullptr, /*healthy_only=*/true).has_value());
}

// A directory may hold another run's checkpoints, with higher steps than this run's: pruning removes
// only this run's lineage below the step it just saved, so neither the new checkpoints nor the others
// are lost, and `latest` always names the one just saved.
TEST(CheckpointManager, PruningRemovesOnlyItsOwnLineageBelowTheStepItSaved) {
  const auto dir = scratch_dir("ckpt_lineage");
  auto old_run = manager(dir, 2);
  old_run.set_lineage("old");
  save_steps(old_run, {99, 100});
  auto run = manager(dir, 2);
  run.set_lineage("new");
  save_steps(run, {10, 20, 30, 40});
  for (int step : {30, 40, 99, 100}) EXPECT_TRUE(fs::exists(dir + "/" + CheckpointManager::step_dir_name(step))) << step;
  for (int step : {10, 20}) EXPECT_FALSE(fs::exists(dir + "/" + CheckpointManager::step_dir_name(step))) << step;
  EXPECT_EQ(read_text_file(dir + "/latest"), "step-00000040\n");
  EXPECT_EQ(CheckpointManager::read_manifest(dir + "/step-00000040").lineage, "new");
  EXPECT_EQ(CheckpointManager::read_manifest(dir + "/step-00000100").lineage, "old");
  // A branch of the old lineage from step 99 does not remove the old run's step 100, which lies beyond it.
  old_run.set_lineage("old");
  save_steps(old_run, {99});
  EXPECT_TRUE(fs::exists(dir + "/step-00000100"));
  EXPECT_TRUE(fs::exists(dir + "/step-00000099"));
}

TEST(CheckpointManager, ACheckpointTheLoaderRefusesIsSkipped) {
  const auto dir = scratch_dir("ckpt_refused");
  auto m = manager(dir);
  save_steps(m, {1, 2});
  std::vector<std::string> warnings;
  auto refuse_2 = [&](const std::string& d) {
    if (d == dir + "/step-00000002") throw std::runtime_error("trainer_state.json says step 99");
  };
  EXPECT_EQ(m.find_resumable(refuse_2, &warnings)->step, 1);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("says step 99; skipped"), std::string::npos) << warnings[0];
}

TEST(CheckpointManager, AFailedSaveLeavesNothingBehind) {
  const auto dir = scratch_dir("ckpt_failed_save");
  auto m = manager(dir);
  save_steps(m, {1});
  EXPECT_THROW(m.save(2, 0, kHealthy, [](const std::string&) { throw std::runtime_error("No space left on device"); }),
               std::runtime_error);
  EXPECT_FALSE(fs::exists(dir + "/step-00000002.tmp"));
  EXPECT_FALSE(fs::exists(dir + "/step-00000002"));
  EXPECT_EQ(read_text_file(dir + "/latest"), "step-00000001\n");
}

TEST(DirectoryLock, ASecondHolderIsRefusedNamingTheFirstAndADeadOnesLockIsTakenOver) {
  const auto dir = scratch_dir("ckpt_lock");
  std::ofstream(dir + "/" + DirectoryLock::kFileName) << "pid 999999 on host elsewhere (since yesterday)\n";
  std::string previous;
  {
    DirectoryLock first(dir, "run directory", &previous);
    EXPECT_EQ(previous, "pid 999999 on host elsewhere (since yesterday)");  // nobody held it: taken over
    const std::string msg = expect_throws([&] { DirectoryLock second(dir, "run directory", nullptr); });
    EXPECT_NE(msg.find("run directory '" + dir + "' is in use by pid " + std::to_string(getpid()) + " on host"), std::string::npos) << msg;
  }
  DirectoryLock again(dir, "run directory", &previous);  // released on destruction, and left clean
  EXPECT_EQ(previous, "");
}

// Asked without taking the lock, so asking cannot make the holder's claim fail.
TEST(DirectoryLock, TheHolderIsNamedWhileItHoldsTheLockAndNobodyOnceItIsReleased) {
  const auto dir = scratch_dir("ckpt_lock_holder");
  EXPECT_EQ(DirectoryLock::holder(dir), std::nullopt);  // no lock file
  std::ofstream(dir + "/" + DirectoryLock::kFileName) << "pid 999999 on host elsewhere (since yesterday)\n";
  EXPECT_EQ(DirectoryLock::holder(dir), std::nullopt);  // a dead holder's name: nobody holds it
  {
    DirectoryLock held(dir, "run directory", nullptr);
    const auto holder = DirectoryLock::holder(dir);
    ASSERT_TRUE(holder.has_value());
    EXPECT_EQ(holder->rfind("pid " + std::to_string(getpid()) + " on host ", 0), 0u) << *holder;
  }
  EXPECT_EQ(DirectoryLock::holder(dir), std::nullopt);
}

// The repro: an atomic write into a full file system left its empty temporary file behind.
TEST(DurableFile, AnAtomicWriteThatFailsRemovesItsTemporaryFile) {
  dtrain::test::SmallTmpfs disk("full_atomic_write", 16 << 10);
  if (!disk.unavailable().empty()) GTEST_SKIP() << disk.unavailable();
  disk.fill();
  write_file_atomically(disk.dir() + "/report.json", "");  // an empty file needs no block: this one fits
  const std::string message = expect_throws([&] { write_file_atomically(disk.dir() + "/report.json", std::string(8192, 'y')); });
  EXPECT_NE(message.find("report.json.tmp"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(disk.dir() + "/report.json.tmp"));
  EXPECT_EQ(read_text_file(disk.dir() + "/report.json"), "");  // the old content stands
}

TEST(CheckpointManager, DueBySteptimeAndEnd) {
  CheckpointOptions o;
  o.dir = "unused";
  o.every_steps = 5;
  o.every_hours = 1.0;
  CheckpointManager m(o, 0, agree_alone());
  EXPECT_TRUE(m.due(10, false, 0));
  EXPECT_FALSE(m.due(11, false, 0.5));
  EXPECT_TRUE(m.due(11, false, 1.0));
  EXPECT_TRUE(m.due(12, true, 0));
}
