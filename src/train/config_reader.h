// Typed reads of a merged config (train/config_schema.h's keys), for the code that resolves it: each
// read names its key and the config's origin when the value has the wrong type or range.
#pragma once
#include <nlohmann/json.hpp>

#include <climits>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>

#include "common/printable_json.h"
#include "common/range_words.h"
#include "train/train_config.h"

namespace dtrain {

// "prefix.key", or "key" at the top level.
inline std::string join_key(const std::string& prefix, const std::string& key) { return prefix.empty() ? key : prefix + "." + key; }

// Throws ConfigError("<origin>: <msg>").
[[noreturn]] inline void fail(const std::string& origin, const std::string& msg) { throw ConfigError(origin + ": " + msg); }

class Reader {
 public:
  Reader(const nlohmann::json& j, std::string origin) : j_(j), origin_(std::move(origin)) {}
  const nlohmann::json& at(const std::string& dotted) const {
    const nlohmann::json* node = &j_;
    std::istringstream parts(dotted);
    for (std::string part; std::getline(parts, part, '.');) node = &node->at(part);
    return *node;
  }
  bool is_auto(const std::string& key) const { return at(key).is_string() && at(key) == "auto"; }
  bool is_null(const std::string& key) const { return at(key).is_null(); }
  // A whole number in [min_value, max_value]. JSON may spell it as a signed, an unsigned or a
  // floating-point number (1e3); whether it fits an int64 is checked before any cast, which for a
  // value like 1e30 or 2^63 would be undefined.
  int64_t integer(const std::string& key, int64_t min_value, int64_t max_value = INT64_MAX) const {
    const nlohmann::json& v = at(key);
    const bool whole = v.is_number_integer() || (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()));
    if (!whole) fail(origin_, "'" + key + "' must be a whole number, got " + printable_json(v));
    const bool fits = v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(INT64_MAX)
                      : v.is_number_integer() ? true
                                              : v.get<double>() >= -0x1p63 && v.get<double>() < 0x1p63;
    if (!fits)
      fail(origin_, "'" + key + "' must be " + range_words(min_value, max_value) + " and fit a 64-bit integer (at most " +
                        std::to_string(INT64_MAX) + "), got " + printable_json(v));
    const int64_t x = v.is_number_integer() ? v.get<int64_t>() : int64_t(v.get<double>());
    if (x < min_value || x > max_value) fail(origin_, "'" + key + "' must be " + range_words(min_value, max_value) + ", got " + printable_json(v));
    return x;
  }
  // "auto" (nullopt), or a whole number as integer() reads it.
  std::optional<int64_t> integer_or_auto(const std::string& key, int64_t min_value, int64_t max_value = INT64_MAX) const {
    if (is_auto(key)) return std::nullopt;
    if (!at(key).is_number())
      fail(origin_, "'" + key + "' must be \"auto\" or a whole number " + range_words(min_value, max_value) + ", got " + printable_json(at(key)));
    return integer(key, min_value, max_value);
  }
  // A whole number that is stored in an int.
  int small_integer(const std::string& key, int min_value, int max_value = INT_MAX) const {
    return int(integer(key, min_value, max_value));
  }
  double number(const std::string& key, double min_value, double max_value = INFINITY) const {
    const nlohmann::json& v = at(key);
    if (!v.is_number()) fail(origin_, "'" + key + "' must be a number, got " + printable_json(v));
    const double x = v.get<double>();
    if (x < min_value || x > max_value) fail(origin_, "'" + key + "' must be " + range_words(min_value, max_value) + ", got " + printable_json(v));
    return x;
  }
  bool boolean(const std::string& key) const {
    if (!at(key).is_boolean()) fail(origin_, "'" + key + "' must be true or false, got " + printable_json(at(key)));
    return at(key).get<bool>();
  }
  std::string text(const std::string& key) const {
    if (!at(key).is_string()) fail(origin_, "'" + key + "' must be a string, got " + printable_json(at(key)));
    return at(key).get<std::string>();
  }
  const std::string& origin() const { return origin_; }

 private:
  const nlohmann::json& j_;
  std::string origin_;
};

}  // namespace dtrain
