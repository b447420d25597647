#include "train/run_trace.h"

#include <algorithm>

#include "ckpt/durable_file.h"
#include "comm/collectives.h"
#include "common/host_name.h"
#include "common/store_bytes.h"

namespace dtrain {

namespace {

double now_us() { return std::chrono::duration<double, std::micro>(ChromeTrace::Clock::now().time_since_epoch()).count(); }

std::string part_key(int rank) { return "trace/part/" + std::to_string(rank); }

nlohmann::json metadata(const char* name, int pid, int tid, nlohmann::json args) {
  return {{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

}  // namespace

RunTrace::RunTrace(World& world) : world_(world), trace_(std::make_shared<ChromeTrace>()) {
  barrier(*world_.world_group(), "trace clock origin");
  origin_us_ = now_us();
  world_.world_group()->log().set_trace(trace_);
}

RunTrace::~RunTrace() { world_.world_group()->log().set_trace(nullptr); }

void RunTrace::write(const std::string& run_dir) {
  world_.world_group()->log().set_trace(nullptr);
  const nlohmann::json part = {{"rank", world_.rank()}, {"host", host_name()}, {"origin_us", origin_us_},
                               {"dropped", trace_->dropped()}, {"events", trace_->events()}};
  if (world_.rank() != 0) {
    world_.store()->set(part_key(world_.rank()), as_bytes(part.dump()));
    return;
  }
  std::vector<nlohmann::json> parts{part};
  for (int r = 1; r < world_.size(); ++r) {
    try {
      parts.push_back(nlohmann::json::parse(as_string(world_.store()->get(part_key(r)))));
    } catch (const std::exception& e) {
      throw std::runtime_error("train.trace: rank " + std::to_string(r) + "'s events did not arrive for " + run_dir + "/trace.json: " + e.what());
    }
  }
  write_file_atomically(run_dir + "/trace.json", merge_trace_parts(parts).dump());
}

nlohmann::json merge_trace_parts(const std::vector<nlohmann::json>& parts) {
  nlohmann::json events = nlohmann::json::array();
  // On rank 0's host one clock serves every rank: one origin keeps their true offsets, the first of
  // them to leave the barrier, so that no event comes before it.
  const std::string first_host = parts.at(0).at("host");
  double host_origin = parts.at(0).at("origin_us");
  for (const nlohmann::json& part : parts)
    if (part.at("host") == first_host) host_origin = std::min(host_origin, part.at("origin_us").get<double>());
  for (const nlohmann::json& part : parts) {
    const int rank = part.at("rank");
    const double origin = part.at("host") == first_host ? host_origin : part.at("origin_us").get<double>();
    nlohmann::json process_args = {{"name", "rank " + std::to_string(rank)}};
    events.push_back(metadata("process_name", rank, 0, process_args));
    events.push_back(metadata("process_sort_index", rank, 0, {{"sort_index", rank}}));
    events.push_back(metadata("thread_name", rank, 0, {{"name", "compute"}}));
    if (part.at("dropped").get<size_t>() > 0)
      events.push_back(metadata("process_labels", rank, 0, {{"labels", std::to_string(part.at("dropped").get<size_t>()) + " events dropped"}}));
    nlohmann::json comm = nlohmann::json::array();
    for (nlohmann::json e : part.at("events")) {
      e["ts"] = e["ts"].get<double>() - origin;
      e["pid"] = rank;
      if (e["cat"] == "comm") {
        comm.push_back(std::move(e));
      } else {
        e["tid"] = 0;
        events.push_back(std::move(e));
      }
    }
    const std::vector<int> lanes = assign_lanes(comm);
    int lanes_used = 0;
    for (size_t i = 0; i < comm.size(); ++i) {
      comm[i]["tid"] = lanes[i] + 1;
      lanes_used = std::max(lanes_used, lanes[i] + 1);
      events.push_back(std::move(comm[i]));
    }
    for (int l = 1; l <= lanes_used; ++l) events.push_back(metadata("thread_name", rank, l, {{"name", "comm " + std::to_string(l)}}));
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

}  // namespace dtrain
