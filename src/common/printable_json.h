// A JSON value as an error message quotes it ("must be a number, got \"fast\""): printable() over
// its dump, with bytes that are not UTF-8 replaced, where a plain dump() would throw instead of
// reporting the value.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

#include "common/printable.h"

namespace dtrain {

inline std::string printable_json(const nlohmann::json& value) {
  return printable(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace dtrain
