#include "train/metrics_log.h"

#include <fstream>

#include "ckpt/durable_file.h"

namespace dtrain {

MetricsLog::MetricsLog(const std::string& path) : path_(path) {
  if (!path.empty()) out_.open(path);
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!out_.is_open()) return;
  out_.append(record.dump() + "\n");
}

std::vector<nlohmann::json> MetricsLog::forget_after(int64_t step) {
  if (!out_.is_open()) return {};
  std::vector<nlohmann::json> forgotten;
  out_.close();
  std::ifstream in(path_);
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    const auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded()) continue;  // a line torn by a crash
    if (record.value("step", int64_t(0)) <= step)
      kept += line + "\n";
    else
      forgotten.push_back(record);
  }
  write_file_atomically(path_, kept);
  out_.open(path_);
  return forgotten;
}

}  // namespace dtrain
