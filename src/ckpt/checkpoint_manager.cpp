#include "ckpt/checkpoint_manager.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "ckpt/durable_file.h"
#include "ckpt/safetensors.h"

namespace dtrain {

namespace fs = std::filesystem;

CheckpointManager::CheckpointManager(CheckpointOptions options, int rank, std::function<void()> barrier)
    : options_(std::move(options)), rank_(rank), barrier_(std::move(barrier)) {}

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

std::string CheckpointManager::save(int64_t step, double elapsed_agreed_hours, const std::function<void(const std::string& dir)>& write_files) {
  const std::string final_dir = options_.dir + "/" + step_dir_name(step);
  const std::string tmp = final_dir + ".tmp";
  if (rank_ == 0) {
    fs::remove_all(tmp);
    fs::create_directories(tmp);
  }
  barrier_();
  write_files(tmp);
  barrier_();
  if (rank_ == 0) {
    commit(tmp, final_dir, step);
    prune();
  }
  barrier_();
  last_save_hours_ = elapsed_agreed_hours;
  return final_dir;
}

void CheckpointManager::commit(const std::string& tmp, const std::string& final_dir, int64_t step) {
  nlohmann::json files = nlohmann::json::object();
  for (const auto& entry : fs::directory_iterator(tmp)) files[entry.path().filename().string()] = entry.file_size();
  write_file_atomically(tmp + "/manifest.json", nlohmann::json{{"step", step}, {"files", files}}.dump(2));
  fsync_directory(tmp);
  fs::remove_all(final_dir);  // a re-save of the same step after a restart replaces it
  fs::rename(tmp, final_dir);
  fsync_directory(options_.dir);
  write_file_atomically(options_.dir + "/latest", step_dir_name(step) + "\n");
}

std::vector<std::pair<int64_t, std::string>> CheckpointManager::committed() const {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.dir, ec)) {
    const std::string name = entry.path().filename().string();
    long long step = 0;
    char rest = 0;
    if (entry.is_directory() && std::sscanf(name.c_str(), "step-%lld%c", &step, &rest) == 1)
      out.emplace_back(step, entry.path().string());
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

void CheckpointManager::prune() const {
  if (options_.keep <= 0) return;
  auto all = committed();
  for (size_t i = size_t(options_.keep); i < all.size(); ++i) fs::remove_all(all[i].second);
}

void CheckpointManager::verify(const std::string& dir) {
  const std::string manifest_path = dir + "/manifest.json";
  if (!fs::exists(manifest_path)) throw std::runtime_error("checkpoint " + dir + " has no manifest.json (it was never committed)");
  const auto manifest = nlohmann::json::parse(read_text_file(manifest_path));
  for (auto it = manifest.at("files").begin(); it != manifest.at("files").end(); ++it) {
    const std::string path = dir + "/" + it.key();
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) throw std::runtime_error("checkpoint " + dir + " is missing " + it.key());
    if (size != it.value().get<uintmax_t>())
      throw std::runtime_error("checkpoint file " + path + " is truncated or changed: " + std::to_string(size) +
                               " bytes, the manifest says " + std::to_string(it.value().get<uintmax_t>()));
    if (path.size() > 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0) verify_safetensors(path);
  }
}

int64_t CheckpointManager::step_of(const std::string& dir) {
  return nlohmann::json::parse(read_text_file(dir + "/manifest.json")).at("step").get<int64_t>();
}

std::optional<std::string> CheckpointManager::find_resumable(std::vector<std::string>* warnings) const {
  std::vector<std::string> candidates;
  std::error_code ec;
  if (fs::exists(options_.dir + "/latest", ec)) {
    std::string name = read_text_file(options_.dir + "/latest");
    name.erase(name.find_last_not_of(" \n\r\t") + 1);
    candidates.push_back(options_.dir + "/" + name);
  }
  for (const auto& [step, dir] : committed())
    if (std::find(candidates.begin(), candidates.end(), dir) == candidates.end()) candidates.push_back(dir);
  for (const auto& dir : candidates) {
    try {
      verify(dir);
      return dir;
    } catch (const std::exception& e) {
      if (warnings) warnings->push_back(std::string(e.what()) + "; falling back to an older checkpoint");
    }
  }
  return std::nullopt;
}

}  // namespace dtrain
