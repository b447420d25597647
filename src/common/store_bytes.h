// Text in and out of a c10d store, which holds byte vectors.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

inline std::vector<uint8_t> as_bytes(const std::string& text) { return std::vector<uint8_t>(text.begin(), text.end()); }
inline std::string as_string(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }

}  // namespace dtrain
