#include "train/metrics_log.h"

#include <stdexcept>

#include "ckpt/durable_file.h"

namespace dtrain {

MetricsLog::MetricsLog(const std::string& path) : path_(path) {
  if (path.empty()) return;
  out_.open(path, std::ios::app);
  if (!out_) throw std::runtime_error("cannot open metrics file " + path + " for writing");
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!out_.is_open()) return;
  out_ << record.dump() << '\n';
  out_.flush();
}

void MetricsLog::forget_after(int64_t step) {
  if (!out_.is_open()) return;
  out_.close();
  std::ifstream in(path_);
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    const auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!record.is_discarded() && record.value("step", int64_t(0)) <= step) kept += line + "\n";
  }
  write_file_atomically(path_, kept);
  out_.open(path_, std::ios::app);
}

}  // namespace dtrain
