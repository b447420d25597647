// `<run_dir>/metrics.jsonl`: one JSON object per line, written by rank 0 — one line per optimizer
// step (step, loss, lr, grad_norm, tokens_per_s, ...) and one per evaluation (val_loss). Each line is
// written through as it is logged, so a crash loses nothing; a line that cannot be written (a full
// disk) throws naming the file, which stops the run.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/log_file.h"

namespace dtrain {

class MetricsLog {
 public:
  // Appends to `path` (a resumed run continues the same file). An empty path writes nothing.
  // Throws naming the path when it cannot be opened or written.
  explicit MetricsLog(const std::string& path);
  void write(const nlohmann::json& record);
  // Drops the lines of steps after `step`: a run resumed from a checkpoint of `step` rewrites the
  // steps that the interrupted attempt logged beyond it, so each step appears once. Returns them.
  std::vector<nlohmann::json> forget_after(int64_t step);

 private:
  std::string path_;
  LogFile out_;
};

}  // namespace dtrain
