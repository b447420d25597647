// How context parallelism computes attention over the cp ranks' sequence shards, by the names
// parallel.context.impl takes: ring attention (k/v travel round the ring; any head count) or
// DeepSpeed-Ulysses (all-to-alls trade sequence shards for head shards; heads divisible by cp).
#pragma once
#include <array>
#include <optional>
#include <string>
#include <utility>

namespace dtrain {

enum class ContextImpl { Ring, Ulysses };

inline constexpr std::array<std::pair<ContextImpl, const char*>, 2> kContextImplNames{{
    {ContextImpl::Ring, "ring"},
    {ContextImpl::Ulysses, "ulysses"},
}};

inline std::string context_impl_name(ContextImpl impl) {
  for (const auto& [i, name] : kContextImplNames)
    if (i == impl) return name;
  return "?";
}

// nullopt for a name that is none of kContextImplNames'.
inline std::optional<ContextImpl> context_impl(const std::string& name) {
  for (const auto& [i, n] : kContextImplNames)
    if (name == n) return i;
  return std::nullopt;
}

struct ContextParallelOptions {
  ContextImpl impl = ContextImpl::Ring;
};

}  // namespace dtrain
