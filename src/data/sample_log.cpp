#include "data/sample_log.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace dtrain {

std::unique_ptr<SampleLog> SampleLog::from_env() {
  const char* prefix = std::getenv("DTRAIN_LOG_SAMPLES");
  if (!prefix || !*prefix) return nullptr;
  const char* rank = std::getenv("RANK");
  const std::string path = std::string(prefix) + ".rank" + (rank && *rank ? rank : "0");
  auto log = std::make_unique<SampleLog>();
  log->out_.open(path, std::ios::app);
  if (!log->out_) throw std::runtime_error("DTRAIN_LOG_SAMPLES: cannot open '" + path + "'");
  return log;
}

void SampleLog::write(int64_t epoch, const std::vector<int64_t>& samples) {
  std::string line = std::to_string(epoch);
  for (int64_t s : samples) line += " " + std::to_string(s);
  out_ << line << '\n' << std::flush;
}

}  // namespace dtrain
