#include "train/metrics_log.h"

#include <stdexcept>

namespace dtrain {

MetricsLog::MetricsLog(const std::string& path) {
  if (path.empty()) return;
  out_.open(path, std::ios::app);
  if (!out_) throw std::runtime_error("cannot open metrics file " + path + " for writing");
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!out_.is_open()) return;
  out_ << record.dump() << '\n';
  out_.flush();
}

}  // namespace dtrain
