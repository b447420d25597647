// The message of the std::invalid_argument a call throws, or "no error": for tests of named errors.
#pragma once
#include <functional>
#include <stdexcept>
#include <string>

namespace dtrain::test {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace dtrain::test
