// How context parallelism computes attention over the cp ranks' sequence shards, by the names
// parallel.context.impl takes: ring attention (k/v travel round the ring; any head count) or
// DeepSpeed-Ulysses (all-to-alls trade sequence shards for head shards; heads divisible by cp).
#pragma once
#include "common/enum_names.h"

namespace dtrain {

enum class ContextImpl { Ring, Ulysses };

inline constexpr EnumNames<ContextImpl, 2> kContextImplNames{{
    {ContextImpl::Ring, "ring"},
    {ContextImpl::Ulysses, "ulysses"},
}};

inline std::string context_impl_name(ContextImpl impl) { return name_in(kContextImplNames, impl); }
// nullopt for a name that is none of kContextImplNames'.
inline std::optional<ContextImpl> context_impl(const std::string& name) { return value_named(kContextImplNames, name); }

struct ContextParallelOptions {
  ContextImpl impl = ContextImpl::Ring;
};

}  // namespace dtrain
