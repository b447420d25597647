// An enum's config names as one table of (value, name) pairs, and the three lookups every such key
// needs: the name of a value, the value of a name, and the names listed for an error.
#pragma once
#include <array>
#include <optional>
#include <string>
#include <utility>

namespace dtrain {

template <typename E, size_t N>
using EnumNames = std::array<std::pair<E, const char*>, N>;

template <typename E, size_t N>
std::string name_in(const EnumNames<E, N>& names, E value) {
  for (const auto& [v, name] : names)
    if (v == value) return name;
  return "?";
}

// nullopt for a name that is none of the table's.
template <typename E, size_t N>
std::optional<E> value_named(const EnumNames<E, N>& names, const std::string& name) {
  for (const auto& [v, n] : names)
    if (name == n) return v;
  return std::nullopt;
}

// "a, b, c": for errors.
template <typename E, size_t N>
std::string names_listed(const EnumNames<E, N>& names) {
  std::string out;
  for (const auto& [v, n] : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

}  // namespace dtrain
