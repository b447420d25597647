#include "optim/section_params.h"

#include <cmath>
#include <stdexcept>

namespace dtrain {

SectionParams::SectionParams(std::string section, const nlohmann::json& params, const std::set<std::string>& known)
    : section_(std::move(section)), params_(params) {
  for (auto it = params.begin(); it != params.end(); ++it)
    if (!known.count(it.key())) throw std::invalid_argument(name(it.key()) + " is not a parameter of this " + section_);
}

double SectionParams::number(const std::string& key, double fallback, double min_value) const {
  if (!has(key)) return fallback;
  if (!raw(key).is_number()) throw std::invalid_argument(name(key) + " must be a number");
  const double x = raw(key).get<double>();
  if (x < min_value) throw std::invalid_argument(name(key) + " must be at least " + std::to_string(min_value));
  return x;
}

int64_t SectionParams::steps(const std::string& key, int64_t fallback) const {
  const double v = number(key, double(fallback));
  if (v < 0 || v != std::floor(v)) throw std::invalid_argument(name(key) + " must be a whole number ≥ 0");
  return int64_t(v);
}

std::string SectionParams::text(const std::string& key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  if (!raw(key).is_string()) throw std::invalid_argument(name(key) + " must be a string");
  return raw(key).get<std::string>();
}

}  // namespace dtrain
