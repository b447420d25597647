#include "data/shuffle_order.h"

#include <stdexcept>

namespace dtrain {

std::optional<ShuffleOrder> parse_shuffle_order(const std::string& setting) {
  if (setting == "auto") return std::nullopt;
  if (setting == "randperm") return ShuffleOrder::Randperm;
  if (setting == "hashed") return ShuffleOrder::Hashed;
  throw std::invalid_argument("must be \"auto\", \"randperm\" or \"hashed\"");
}

ShuffleOrder resolve_shuffle_order(std::optional<ShuffleOrder> setting, int64_t samples) {
  if (setting) return *setting;
  return samples <= kRandpermMaxSamples ? ShuffleOrder::Randperm : ShuffleOrder::Hashed;
}

const char* shuffle_order_name(ShuffleOrder order) { return order == ShuffleOrder::Randperm ? "randperm" : "hashed"; }

}  // namespace dtrain
