// Typed reads of a config section's free-form `params` object (optimizer.params,
// scheduler.params), whose valid keys depend on the chosen type. Every error names the full key.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <set>
#include <string>

namespace dtrain {

class SectionParams {
 public:
  // `section` is "optimizer" or "scheduler"; a key outside `known` is an error naming it.
  SectionParams(std::string section, const nlohmann::json& params, const std::set<std::string>& known);

  bool has(const std::string& key) const { return params_.contains(key); }
  const nlohmann::json& raw(const std::string& key) const { return params_.at(key); }
  double number(const std::string& key, double fallback, double min_value = -std::numeric_limits<double>::infinity(),
                double max_value = std::numeric_limits<double>::infinity()) const;
  // A whole number ≥ 0 (steps, counts), at most 2^53: a double holds every such number exactly, and
  // schedules add to it without overflow.
  int64_t steps(const std::string& key, int64_t fallback) const;
  std::string text(const std::string& key, const std::string& fallback) const;
  bool boolean(const std::string& key, bool fallback) const;
  // "optimizer.params.<key>", for messages (the key as the user wrote it, made printable).
  std::string name(const std::string& key) const;

 private:
  std::string section_;
  const nlohmann::json& params_;
};

}  // namespace dtrain
