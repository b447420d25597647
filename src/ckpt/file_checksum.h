// The checksum a checkpoint manifest records for each file: XXH3-64 of its bytes as 16 hex digits.
// XXH3 runs at memory speed (many GB/s per core), so verifying a checkpoint costs about what reading
// it does, and it catches any change to a file, including one that keeps its size.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

namespace dtrain {

// Throws naming the file when it cannot be read.
std::string file_checksum(const std::string& path);

// The same checksum of bytes given piece by piece, in order: for a reader that checks a file's
// contents as it goes and so reads it once for both.
class Checksum {
 public:
  Checksum();
  ~Checksum();
  Checksum(const Checksum&) = delete;
  Checksum& operator=(const Checksum&) = delete;
  void update(const void* bytes, size_t n);
  std::string hex() const;  // of everything given so far

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dtrain
