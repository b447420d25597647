#include "ckpt/checkpoint_manager.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "ckpt/crash_points.h"
#include "ckpt/durable_file.h"
#include "ckpt/file_checksum.h"
#include "ckpt/safetensors.h"
#include "common/printable.h"

namespace dtrain {

namespace fs = std::filesystem;

namespace {

constexpr const char* kTmpSuffix = ".tmp";

// The step a "step-00000100" name stands for; nullopt for any other name.
std::optional<int64_t> step_in_name(const std::string& name) {
  long long step = 0;
  int used = 0;
  if (std::sscanf(name.c_str(), "step-%lld%n", &step, &used) != 1 || size_t(used) != name.size() || step < 0) return std::nullopt;
  return step;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

[[noreturn]] void damaged(const std::string& file, const std::string& what) {
  throw std::runtime_error("checkpoint file '" + file + "' " + what);
}

// manifest.json of `dir`, parsed and checked for the fields every reader needs; throws naming it.
nlohmann::json read_manifest_json(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw std::runtime_error("checkpoint '" + dir + "' does not exist");
  if (!fs::is_directory(dir, ec)) throw std::runtime_error("checkpoint '" + dir + "' is not a directory");
  const std::string path = dir + "/manifest.json";
  if (!fs::exists(path, ec)) throw std::runtime_error("checkpoint '" + dir + "' has no manifest.json: it is not a committed checkpoint");
  nlohmann::json m;
  try {
    m = read_json_file(path);
  } catch (const NotJson& e) {
    damaged(path, e.what());
  }
  if (!m.is_object() || !m.contains("step") || !m["step"].is_number_unsigned() || !m.contains("files") ||
      !m["files"].is_object() || !m.contains("healthy") || !m["healthy"].is_boolean())
    damaged(path, "lacks step, healthy or files (damaged, or written by an older dtrain)");
  return m;
}

// What the manifest `m` of `dir` says, its step checked against the directory's name.
CheckpointInfo info_of(const std::string& dir, const nlohmann::json& m) {
  CheckpointInfo info{dir, m["step"].get<int64_t>(), {m["healthy"].get<bool>(), m.value("health_note", "")}, ""};
  if (m.contains("lineage")) {
    if (!m["lineage"].is_string()) damaged(dir + "/manifest.json", "has a lineage that is not a string");
    info.lineage = m["lineage"].get<std::string>();
  }
  const auto named = step_in_name(fs::path(dir).filename().string());
  if (named && *named != info.step)
    damaged(dir + "/manifest.json",
            "says step " + std::to_string(info.step) + " but the directory is named for step " + std::to_string(*named));
  return info;
}

}  // namespace

AgreeOnFailures agree_alone() {
  return [](bool ok) { return ok ? std::vector<int>{} : std::vector<int>{0}; };
}

CheckpointManager::CheckpointManager(CheckpointOptions options, int rank, AgreeOnFailures agree)
    : options_(std::move(options)), rank_(rank), agree_(std::move(agree)) {}

std::string CheckpointManager::step_dir_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return name;
}

bool CheckpointManager::due(int64_t step, bool last_step, double elapsed_agreed_hours) const {
  if (last_step && options_.save_at_end) return true;
  if (options_.every_steps > 0 && step % options_.every_steps == 0) return true;
  return options_.every_hours > 0 && elapsed_agreed_hours - last_save_hours_ >= options_.every_hours;
}

std::string CheckpointManager::save(int64_t step, double elapsed_agreed_hours, const CheckpointHealth& health,
                                    const std::function<void(const std::string& dir)>& write_files,
                                    const std::function<void(const std::string& dir)>& finish) {
  const std::string final_dir = options_.dir + "/" + step_dir_name(step);
  const std::string tmp = final_dir + kTmpSuffix;
  if (rank_ == 0) {
    fs::remove_all(tmp);
    fs::create_directories(tmp);
  }
  agree_(true);
  // A save that fails (a full disk) on any rank leaves nothing behind: the previous checkpoints stay
  // the newest. Every rank learns of the failure at the next agreement, rather than waiting out the
  // collective timeout for a rank that is gone.
  auto all_or_nothing = [&](const std::function<void()>& work, const std::string& part) {
    std::exception_ptr error;
    try {
      work();
    } catch (...) {
      error = std::current_exception();
    }
    const std::vector<int> failed = agree_(!error);
    if (failed.empty()) return;
    std::error_code ec;
    if (rank_ == 0) fs::remove_all(tmp, ec);
    if (error) std::rethrow_exception(error);
    std::string ranks;
    for (int r : failed) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    throw std::runtime_error("checkpoint of step " + std::to_string(step) + ": rank(s) " + ranks + " failed to " + part +
                             " (their logs say why); nothing of it is kept");
  };
  all_or_nothing([&] { write_files(tmp); }, "write their part");
  crash_point("save", step);
  all_or_nothing(
      [&] {
        if (rank_ != 0) return;
        if (finish) finish(tmp);
        commit(tmp, final_dir, step, health);
      },
      "index and commit it");
  if (rank_ == 0) prune(step);
  last_save_hours_ = elapsed_agreed_hours;
  return final_dir;
}

void CheckpointManager::commit(const std::string& tmp, const std::string& final_dir, int64_t step, const CheckpointHealth& health) {
  nlohmann::json files = nlohmann::json::object();
  for (const auto& entry : fs::directory_iterator(tmp)) {
    const std::string path = entry.path().string();
    files[entry.path().filename().string()] = {{"bytes", entry.file_size()}, {"xxh3", file_checksum(path)}};
  }
  nlohmann::json manifest = {{"step", step}, {"healthy", health.healthy}, {"lineage", options_.lineage}, {"files", files}};
  if (!health.healthy) manifest["health_note"] = health.note;
  write_file_atomically(tmp + "/manifest.json", manifest.dump(2));
  crash_point("manifest", step);
  fs::remove_all(final_dir);  // a re-save of the same step after a restart replaces it
  fs::rename(tmp, final_dir);
  fsync_directory(options_.dir);
  crash_point("commit", step);
  write_file_atomically(options_.dir + "/latest", step_dir_name(step) + "\n");
}

std::vector<std::pair<int64_t, std::string>> CheckpointManager::committed() const {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.dir, ec))
    if (auto step = step_in_name(entry.path().filename().string()); step && entry.is_directory(ec))
      out.emplace_back(*step, entry.path().string());
  std::sort(out.rbegin(), out.rend());
  return out;
}

void CheckpointManager::remove_interrupted_saves() const {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (ends_with(name, kTmpSuffix) && (name == std::string("latest") + kTmpSuffix ||
                                        step_in_name(name.substr(0, name.size() - std::string(kTmpSuffix).size()))))
      fs::remove_all(entry.path(), ec);
  }
}

std::vector<std::string> CheckpointManager::committed_after(int64_t step) const {
  std::vector<std::string> out;
  for (const auto& [s, dir] : committed())
    if (s > step) out.push_back(dir);
  return out;
}

std::string CheckpointManager::new_lineage() {
  std::random_device entropy;
  char name[40];
  std::snprintf(name, sizeof name, "%08x%08x", entropy(), entropy());
  return name;
}

// Only this lineage's checkpoints up to the one just saved are candidates: a directory may also hold
// another run's checkpoints, or later ones of a line this run branched from, and those are not this
// run's to remove. The one just saved is the newest candidate, so it is always kept.
void CheckpointManager::prune(int64_t saved_step) const {
  if (options_.keep <= 0) return;
  std::vector<CheckpointInfo> own;
  for (const auto& [step, dir] : committed()) {
    if (step > saved_step) continue;
    try {
      if (auto info = read_manifest(dir); info.lineage == options_.lineage) own.push_back(info);
    } catch (const std::exception&) {  // a damaged manifest's lineage is unknown: leave it
    }
  }
  const auto good = std::find_if(own.begin(), own.end(), [](const CheckpointInfo& i) { return i.health.healthy; });
  for (size_t i = size_t(options_.keep); i < own.size(); ++i)
    if (good == own.end() || own[i].dir != good->dir) fs::remove_all(own[i].dir);
}

CheckpointInfo CheckpointManager::read_manifest(const std::string& dir) { return info_of(dir, read_manifest_json(dir)); }

CheckpointInfo CheckpointManager::verify(const std::string& dir) {
  const nlohmann::json manifest = read_manifest_json(dir);
  const CheckpointInfo info = info_of(dir, manifest);
  const auto& files = manifest["files"];
  for (auto it = files.begin(); it != files.end(); ++it) {
    const std::string path = dir + "/" + it.key();
    const auto& spec = it.value();
    if (!spec.is_object() || !spec.contains("bytes") || !spec["bytes"].is_number_unsigned() || !spec.contains("xxh3") ||
        !spec["xxh3"].is_string())
      damaged(dir + "/manifest.json", "has a malformed entry for " + it.key());
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) damaged(path, "is missing");
    if (size != spec["bytes"].get<uintmax_t>())
      damaged(path, "is truncated or changed: " + std::to_string(size) + " bytes, the manifest says " +
                        std::to_string(spec["bytes"].get<uintmax_t>()));
    const std::string expected = spec["xxh3"].get<std::string>();
    auto check_sum = [&](const std::string& sum) {
      if (sum != expected) damaged(path, "is damaged: its checksum does not match the manifest");
    };
    if (!ends_with(path, ".safetensors")) {
      check_sum(file_checksum(path));
      continue;
    }
    // One read checks the tensors and sums the bytes. A file that fails the tensor checks is named
    // damaged first when its bytes changed since the save, as that is the cause.
    Checksum sum;
    try {
      verify_safetensors(path, [&](const char* bytes, size_t n) { sum.update(bytes, n); });
    } catch (const std::runtime_error&) {
      check_sum(file_checksum(path));
      throw;
    }
    check_sum(sum.hex());
  }
  return info;
}

void CheckpointManager::require_directory(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec))
    throw std::invalid_argument("'" + printable(path) + "' " + (fs::exists(path, ec) ? "is not a directory" : "does not exist"));
}

std::optional<CheckpointInfo> CheckpointManager::resolve(const std::string& path,
                                                         const std::function<void(const std::string& dir)>& load,
                                                         std::vector<std::string>* warnings) {
  require_directory(path);
  std::error_code ec;
  if (fs::exists(path + "/manifest.json", ec)) {
    CheckpointInfo info = verify(path);
    if (load) load(path);
    return info;
  }
  CheckpointOptions options;
  options.dir = path;
  return CheckpointManager(options, 0, agree_alone()).find_resumable(load, warnings);
}

std::optional<CheckpointInfo> CheckpointManager::find_resumable(const std::function<void(const std::string& dir)>& load,
                                                                std::vector<std::string>* warnings, bool healthy_only) const {
  auto warn = [&](const std::string& line) {
    if (warnings) warnings->push_back(line);
  };
  std::vector<CheckpointInfo> healthy, unhealthy;
  for (const auto& [step, dir] : committed()) {
    try {
      auto info = read_manifest(dir);
      (info.health.healthy ? healthy : unhealthy).push_back(info);
    } catch (const std::exception& e) {
      warn(std::string(e.what()) + "; skipped");
    }
  }
  std::vector<CheckpointInfo> order = healthy;
  if (!healthy_only) order.insert(order.end(), unhealthy.begin(), unhealthy.end());
  for (const auto& info : order) {
    try {
      verify(info.dir);
      if (load) load(info.dir);
    } catch (const std::exception& e) {
      warn(std::string(e.what()) + "; skipped");
      continue;
    }
    for (const auto& u : unhealthy)
      if (!healthy_only && info.health.healthy && u.step > info.step)
        warn("checkpoint '" + u.dir + "' was taken when training had gone wrong (" + u.health.note + "); using step " +
             std::to_string(info.step) + " instead (train.resume=" + u.dir + " forces it)");
    return info;
  }
  return std::nullopt;
}

}  // namespace dtrain
