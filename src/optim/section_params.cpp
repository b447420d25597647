#include "optim/section_params.h"

#include <cmath>
#include <stdexcept>

#include "common/printable.h"
#include "common/printable_json.h"
#include "common/range_words.h"

namespace dtrain {

SectionParams::SectionParams(std::string section, const nlohmann::json& params, const std::set<std::string>& known)
    : section_(std::move(section)), params_(params) {
  for (auto it = params.begin(); it != params.end(); ++it)
    if (!known.count(it.key())) throw std::invalid_argument(name(it.key()) + " is not a parameter of this " + section_);
}

std::string SectionParams::name(const std::string& key) const { return section_ + ".params." + printable(key); }

double SectionParams::number(const std::string& key, double fallback, double min_value, double max_value) const {
  if (!has(key)) return fallback;
  if (!raw(key).is_number()) throw std::invalid_argument(name(key) + " must be a number, got " + printable_json(raw(key)));
  const double x = raw(key).get<double>();
  if (x < min_value || x > max_value)
    throw std::invalid_argument(name(key) + " must be " + range_words(min_value, max_value) + ", got " + printable_json(raw(key)));
  return x;
}

int64_t SectionParams::steps(const std::string& key, int64_t fallback) const {
  const double v = number(key, double(fallback), 0, 0x1p53);
  if (v != std::floor(v)) throw std::invalid_argument(name(key) + " must be a whole number, got " + printable_json(raw(key)));
  return int64_t(v);
}

std::string SectionParams::text(const std::string& key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  if (!raw(key).is_string()) throw std::invalid_argument(name(key) + " must be a string, got " + printable_json(raw(key)));
  return raw(key).get<std::string>();
}

bool SectionParams::boolean(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  if (!raw(key).is_boolean()) throw std::invalid_argument(name(key) + " must be true or false, got " + printable_json(raw(key)));
  return raw(key).get<bool>();
}

}  // namespace dtrain
