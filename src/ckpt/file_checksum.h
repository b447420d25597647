// The checksum a checkpoint manifest records for each file: XXH3-64 of its bytes as 16 hex digits.
// XXH3 runs at memory speed (many GB/s per core), so verifying a checkpoint costs about what reading
// it does, and it catches any change to a file, including one that keeps its size.
#pragma once
#include <string>

namespace dtrain {

// Throws naming the file when it cannot be read.
std::string file_checksum(const std::string& path);

}  // namespace dtrain
