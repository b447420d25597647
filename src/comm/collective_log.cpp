#include "comm/collective_log.h"

#include <sstream>

namespace dtrain {
namespace {
const char* state_name(OpState s) {
  switch (s) {
    case OpState::Entered: return "entered";
    case OpState::Completed: return "completed";
    case OpState::Failed: return "failed";
  }
  return "?";
}
}  // namespace

std::string CollectiveRecord::describe() const {
  std::ostringstream s;
  s << op;
  if (seq > 0) s << " #" << seq;
  s << " [";
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? "," : "") << shape[i];
  s << "] " << dtype;
  if (!label.empty()) s << " '" << label << "'";
  return s.str();
}

void CollectiveLog::add_group(const std::string& key, const std::string& name, const std::vector<int>& ranks) {
  std::lock_guard<std::mutex> lock(mutex_);
  groups_[key].name = name;
  groups_[key].ranks = ranks;
}

void CollectiveLog::record(const std::string& group_key, const CollectiveRecord& r) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& entries = groups_[group_key].entries;
  entries.push_back(r);
  if (entries.size() > capacity_) entries.pop_front();
}

void CollectiveLog::set_state(const std::string& group_key, int64_t seq, const std::string& op, OpState state) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& entries = groups_[group_key].entries;
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (it->seq == seq && it->op == op) {
      it->state = state;
      return;
    }
  }
}

void CollectiveLog::set_trace(std::shared_ptr<ChromeTrace> trace) {
  std::lock_guard<std::mutex> lock(mutex_);
  trace_ = std::move(trace);
}

std::shared_ptr<ChromeTrace> CollectiveLog::trace() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return trace_;
}

nlohmann::json CollectiveLog::to_json() const {
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, h] : groups_) {
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& r : h.entries)
      entries.push_back({{"seq", r.seq}, {"op", r.op}, {"shape", r.shape}, {"dtype", r.dtype},
                         {"label", r.label}, {"state", state_name(r.state)}});
    out[key] = {{"name", h.name}, {"ranks", h.ranks}, {"entries", entries}};
  }
  return out;
}

CollectiveRecord record_from_json(const nlohmann::json& j) {
  CollectiveRecord r;
  r.seq = j.at("seq").get<int64_t>();
  r.op = j.at("op").get<std::string>();
  r.shape = j.at("shape").get<std::vector<int64_t>>();
  r.dtype = j.at("dtype").get<std::string>();
  r.label = j.at("label").get<std::string>();
  const std::string s = j.at("state").get<std::string>();
  r.state = s == "completed" ? OpState::Completed : s == "failed" ? OpState::Failed : OpState::Entered;
  return r;
}

std::string dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return "float32";
    case c10::kDouble: return "float64";
    case c10::kHalf: return "float16";
    case c10::kBFloat16: return "bfloat16";
    case c10::kLong: return "int64";
    case c10::kInt: return "int32";
    case c10::kShort: return "int16";
    case c10::kChar: return "int8";
    case c10::kByte: return "uint8";
    case c10::kBool: return "bool";
    default: return c10::toString(t);
  }
}

}  // namespace dtrain
