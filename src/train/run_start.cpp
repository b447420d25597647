#include "train/run_start.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "ckpt/checkpoint_manager.h"
#include "common/printable.h"

namespace dtrain {

namespace fs = std::filesystem;

namespace {

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return fs::equivalent(a, b, ec);
}

// The step a train.resume path starts from: a step directory's, or a checkpoint directory's newest.
// nullopt when the path cannot tell (missing, damaged): choosing the checkpoint then names the fault.
std::optional<int64_t> start_step_of(const std::string& path) {
  std::error_code ec;
  try {
    if (fs::exists(path + "/manifest.json", ec)) return CheckpointManager::read_manifest(path).step;
    if (!fs::is_directory(path, ec)) return std::nullopt;
    CheckpointOptions options;
    options.dir = path;
    const auto all = CheckpointManager(options, 0, agree_alone()).committed_after(-1);
    if (all.empty()) return std::nullopt;
    return CheckpointManager::read_manifest(all.front()).step;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// What a finished or running dtrain run leaves in its run directory (the launcher's own reports aside).
std::vector<std::string> run_files_in(const std::string& run_dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool rank_log = name.rfind("rank-", 0) == 0 && name.size() > 4 && name.compare(name.size() - 4, 4, ".log") == 0;
    if (name == "config.json" || name == "metrics.jsonl" || rank_log) found.push_back(name);
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::string listed(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + printable(fs::path(n).filename().string());
  return out;
}

void refuse_overwriting_the_input(const TrainConfig& c) {
  const std::string written = c.run_dir + "/config.json";
  if (!c.config_path.empty() && same_file(c.config_path, written))
    throw ConfigError("--config '" + printable(c.config_path) + "' is the run directory's config.json, which a run replaces with its "
                      "resolved config, and a run never writes over its input: copy it (cp " + printable(written) +
                      " my-config.json) and pass the copy");
}

}  // namespace

bool resumes_within(const std::string& resume, const std::string& checkpoint_dir) {
  return same_file(resume, checkpoint_dir) || same_file(fs::path(resume).lexically_normal().parent_path().string(), checkpoint_dir);
}

ConfigError resume_path_error(const std::string& problem) {
  return ConfigError("train.resume: " + problem + " (give a step directory like ckpt/step-00000100, a checkpoint directory, \"auto\" or \"never\")");
}

void require_resume_path(const TrainConfig& c) {
  if (c.resume == "auto" || c.resume == "never") return;
  try {
    CheckpointManager::require_directory(c.resume);
  } catch (const std::invalid_argument& e) {
    throw resume_path_error(e.what());
  }
}

StartPlan plan_start(const TrainConfig& c, int restart_count) {
  refuse_overwriting_the_input(c);
  const std::string ckpt = c.checkpoint_dir();
  CheckpointOptions options;
  options.dir = ckpt;
  const CheckpointManager checkpoints(options, 0, agree_alone());
  StartPlan plan{c.resume, {}};
  const bool explicit_path = c.resume != "auto" && c.resume != "never";
  const std::optional<int64_t> start = c.resume == "never" ? std::optional<int64_t>(0) : explicit_path ? start_step_of(c.resume) : std::nullopt;

  if (restart_count > 0) {
    // Whatever a first start found beyond its starting step it refused or removed, so what lies
    // beyond it now is this job's own.
    if (c.resume == "auto" || !start) return plan;
    if (!checkpoints.committed_after(*start).empty()) {
      plan.resume = "auto";
      plan.notes.push_back("restart " + std::to_string(restart_count) + ": resuming the newest checkpoint this job wrote in " +
                           printable(ckpt) + " (train.resume=" + printable(c.resume) + " applies to the job's first start)");
    } else if (explicit_path) {
      plan.notes.push_back("restart " + std::to_string(restart_count) + ": the job has written no checkpoint yet, so it starts again from train.resume=" +
                           printable(c.resume));
    }
    return plan;
  }

  const bool resumes_this_run = c.resume == "auto" ? !checkpoints.committed_after(-1).empty() : explicit_path && resumes_within(c.resume, ckpt);
  if (const auto files = run_files_in(c.run_dir); !files.empty() && !resumes_this_run) {
    if (!c.start_over)
      throw ConfigError("train.run_dir: '" + printable(c.run_dir) + "' already holds another run's files (" + listed(files) +
                        ") and this run does not resume it: give this run its own train.run_dir, resume that run (train.resume=auto, "
                        "with its checkpoints in checkpoint.dir), or set train.start_over=true to replace them");
    for (const auto& f : files) fs::remove(c.run_dir + "/" + f);
    plan.notes.push_back("train.start_over: removed an earlier run's " + listed(files) + " from " + printable(c.run_dir));
  }

  if (!start) return plan;
  std::vector<std::string> later = checkpoints.committed_after(*start);
  std::reverse(later.begin(), later.end());  // oldest first, as a listing reads
  if (!later.empty()) {
    const std::string where = c.resume == "never" ? "train.resume=never" : "train.resume=" + printable(c.resume);
    if (!c.start_over)
      throw ConfigError("checkpoint.dir: '" + printable(ckpt) + "' holds checkpoints beyond step " + std::to_string(*start) +
                        ", where this run starts (" + where + "): " + listed(later) +
                        ". Its saves would replace them, and a restart would resume them instead of its own: resume them "
                        "(train.resume=auto), give this run its own checkpoint.dir, or set train.start_over=true to remove them");
    for (const auto& dir : later) fs::remove_all(dir);
    std::error_code ec;
    fs::remove(ckpt + "/latest", ec);  // it may name one of them; the next save writes it again
    plan.notes.push_back("train.start_over: removed " + std::to_string(later.size()) + " checkpoint(s) beyond step " +
                         std::to_string(*start) + " from " + printable(ckpt) + ": " + listed(later));
  }
  return plan;
}

}  // namespace dtrain
