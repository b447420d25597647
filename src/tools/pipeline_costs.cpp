#include "tools/pipeline_costs.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "common/printable.h"

namespace dtrain {

namespace {

// A finite number, all of `text`.
std::optional<double> number_of(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno || !std::isfinite(x)) return std::nullopt;
  return x;
}

}  // namespace

PipelineCosts parse_costs(const std::string& text, PipelineCosts costs) {
  std::optional<double> input;
  bool weight_given = false, backward_given = false;
  std::istringstream entries(text);
  for (std::string entry; std::getline(entries, entry, ',');) {
    const auto eq = entry.find('=');
    const std::string name = entry.substr(0, eq);
    const auto value = eq == std::string::npos ? std::nullopt : number_of(entry.substr(eq + 1));
    if (!value) throw std::invalid_argument("--costs: '" + printable(entry) + "' is not NAME=NUMBER (as in F=1,B=2,W=1)");
    if (name == "F") costs.forward = *value;
    else if (name == "B") costs.backward = *value, backward_given = true;
    else if (name == "W") costs.weight = *value, weight_given = true;
    else if (name == "I") input = *value;
    else if (name == "comm") costs.comm = *value;
    else throw std::invalid_argument("--costs: unknown action '" + printable(name) + "' (known: F, B, I, W, comm)");
  }
  if (input) costs.backward = *input + costs.weight;
  else if (backward_given && !weight_given) costs.weight = costs.backward / 2;  // the defaults' share, as a trace without W gets
  try {
    costs.validate();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("--costs: " + std::string(e.what()));
  }
  return costs;
}

namespace {

using SliceSums = std::map<std::string, std::pair<double, int>>;  // name -> (total microseconds, slices)

// Costs from mean slices: B the mean B, or without B the mean I + the mean W; W the mean W, or
// without it half of B (the default costs' share). Empty without F and B (or I and W).
std::optional<TraceCosts> mean_costs(const SliceSums& sums) {
  auto mean = [&](const std::string& name) -> std::optional<double> {
    const auto it = sums.find(name);
    if (it == sums.end()) return std::nullopt;
    return it->second.first / it->second.second;
  };
  auto count = [&](const std::string& name) { return std::to_string(sums.at(name).second); };
  if (!mean("F") || (!mean("B") && !(mean("I") && mean("W")))) return std::nullopt;
  TraceCosts out;
  out.costs.forward = *mean("F");
  out.how = "F the mean of " + count("F") + " slices";
  if (mean("B")) {
    out.costs.backward = *mean("B");
    out.how += ", B of " + count("B");
  } else {
    out.costs.backward = *mean("I") + *mean("W");
    out.how += ", B the mean I (" + count("I") + " slices) + the mean W";
  }
  if (mean("W")) {
    out.costs.weight = *mean("W");
    out.how += ", W of " + count("W");
  } else {
    out.costs.weight = out.costs.backward / 2;
    out.how += ", W not traced: B/2";
  }
  return out;
}

}  // namespace

TraceCosts trace_costs(const std::string& path) {
  const std::string flag = "--trace " + printable(path);
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(flag + ": cannot be read");
  nlohmann::json trace;
  try {
    trace = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(flag + ": not JSON (" + std::string(e.what()) + ")");
  }
  // Chrome's trace format: an array of events, or an object holding them under traceEvents.
  const nlohmann::json& events = trace.is_object() && trace.contains("traceEvents") ? trace["traceEvents"] : trace;
  if (!events.is_array()) throw std::invalid_argument(flag + ": no event array (a list, or an object with traceEvents)");
  SliceSums sums;
  std::map<int64_t, SliceSums> by_chunk;
  for (const auto& e : events) {
    if (!e.is_object() || e.value("ph", "") != "X" || e.value("cat", "") != "compute" || !e.contains("dur") || !e["dur"].is_number())
      continue;
    const std::string name = e.value("name", "");
    if (name != "F" && name != "B" && name != "I" && name != "W") continue;
    const double dur = e["dur"].get<double>();
    sums[name].first += dur;
    sums[name].second += 1;
    const nlohmann::json* args = e.contains("args") && e["args"].is_object() ? &e["args"] : nullptr;
    if (args && args->contains("chunk") && (*args)["chunk"].is_number_integer()) {
      auto& slot = by_chunk[(*args)["chunk"].get<int64_t>()][name];
      slot.first += dur;
      slot.second += 1;
    }
  }
  std::optional<TraceCosts> out = mean_costs(sums);
  if (!out)
    throw std::invalid_argument(flag + ": no compute slices named F and B (or I and W): \"ph\": \"X\", \"cat\": \"compute\", \"dur\" in us");
  try {
    out->costs.validate();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(flag + ": " + e.what());
  }
  // Chunks 0..C-1, each with valid costs of its own, or none: a trace without chunk numbers, or with a
  // chunk missing an action, keeps the means for every chunk.
  auto valid = [](const std::optional<TraceCosts>& c) {
    if (!c) return false;
    try {
      c->costs.validate();
      return true;
    } catch (const std::invalid_argument&) {
      return false;
    }
  };
  if (!by_chunk.empty() && by_chunk.begin()->first == 0 && by_chunk.rbegin()->first == int64_t(by_chunk.size()) - 1) {
    for (const auto& [chunk, chunk_sums] : by_chunk) {
      const std::optional<TraceCosts> own = mean_costs(chunk_sums);
      if (!valid(own)) {
        out->chunks.clear();
        break;
      }
      out->chunks.push_back(own->costs);
    }
  }
  return *out;
}

}  // namespace dtrain
