#include "comm/chrome_trace.h"

#include <algorithm>
#include <numeric>

namespace dtrain {

namespace {

double microseconds(ChromeTrace::Clock::duration d) { return double(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()) / 1e3; }

}  // namespace

ChromeTrace::ChromeTrace() {
  events_.reserve(kReservedEvents);
  text_.reserve(kReservedText);
}

void ChromeTrace::record(std::string name, std::string category, Clock::time_point begin, Clock::time_point end, nlohmann::json args) {
  const std::string args_text = args.is_null() ? std::string() : args.dump();
  std::lock_guard<std::mutex> lock(mutex_);
  if (events_.size() >= kMaxEvents) {
    ++dropped_;
    return;
  }
  events_.push_back({begin, end, text_.size(), uint32_t(name.size()), uint32_t(category.size()), uint32_t(args_text.size())});
  text_.append(name).append(category).append(args_text);
}

nlohmann::json ChromeTrace::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<const Event*> order;
  for (const Event& e : events_) order.push_back(&e);
  // Recorded when they end: an outer slice comes after the ones inside it.
  std::stable_sort(order.begin(), order.end(), [](const Event* a, const Event* b) { return a->begin < b->begin; });
  nlohmann::json out = nlohmann::json::array();
  for (const Event* e : order) {
    const char* name = text_.data() + e->text_at;
    const char* category = name + e->name_len;
    const char* args = category + e->category_len;
    nlohmann::json event = {{"name", std::string(name, e->name_len)}, {"cat", std::string(category, e->category_len)}, {"ph", "X"},
                            {"ts", microseconds(e->begin.time_since_epoch())}, {"dur", microseconds(e->end - e->begin)}};
    if (e->args_len > 0) event["args"] = nlohmann::json::parse(args, args + e->args_len);
    out.push_back(std::move(event));
  }
  return out;
}

size_t ChromeTrace::dropped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

std::vector<int> assign_lanes(const nlohmann::json& events) {
  std::vector<size_t> order(events.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return events[a]["ts"].get<double>() < events[b]["ts"].get<double>(); });
  std::vector<double> lane_end;  // when each lane's last slice ends
  std::vector<int> lane(events.size());
  for (size_t i : order) {
    const double begin = events[i]["ts"].get<double>(), end = begin + events[i]["dur"].get<double>();
    size_t l = 0;
    while (l < lane_end.size() && lane_end[l] > begin) ++l;
    if (l == lane_end.size()) lane_end.push_back(end);
    lane_end[l] = end;
    lane[i] = int(l);
  }
  return lane;
}

}  // namespace dtrain
