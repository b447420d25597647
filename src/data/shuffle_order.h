// Which permutation a shuffled epoch follows (data.shuffle_order). PyTorch's `randperm` order is
// what a PyTorch run with the same seed sees, and it is materialized: 8 bytes per training sample.
// The hashed order (data/hashed_permutation.h) is computed per index and costs no memory however
// large the corpus. "auto" keeps PyTorch's order while its indices fit in 64 MiB.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace dtrain {

enum class ShuffleOrder { Randperm, Hashed };

// Above this many training samples "auto" chooses the hashed order: 2^23 indices are 64 MiB.
constexpr int64_t kRandpermMaxSamples = int64_t(1) << 23;

// "randperm" or "hashed", or nullopt for "auto"; throws std::invalid_argument for anything else.
std::optional<ShuffleOrder> parse_shuffle_order(const std::string& setting);
// The order for `samples` training samples: the one given, or what "auto" picks.
ShuffleOrder resolve_shuffle_order(std::optional<ShuffleOrder> setting, int64_t samples);
// "randperm" or "hashed", as the config spells it.
const char* shuffle_order_name(ShuffleOrder order);

}  // namespace dtrain
