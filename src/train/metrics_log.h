// `<run_dir>/metrics.jsonl`: one JSON object per line, written by rank 0 — one line per optimizer
// step (step, loss, lr, grad_norm, tokens_per_s, ...) and one per evaluation (val_loss). Each line is
// flushed as written, so a crash loses nothing that was logged.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <string>

namespace dtrain {

class MetricsLog {
 public:
  // Appends to `path` (a resumed run continues the same file). An empty path writes nothing.
  explicit MetricsLog(const std::string& path);
  void write(const nlohmann::json& record);
  // Drops the lines of steps after `step`: a run resumed from a checkpoint of `step` rewrites the
  // steps that the interrupted attempt logged beyond it, so each step appears once.
  void forget_after(int64_t step);

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace dtrain
