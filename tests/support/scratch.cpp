#include "support/scratch.h"

#include <unistd.h>

#include <filesystem>

namespace dtrain::test {

std::string scratch_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("dtrain_test_" + std::to_string(::getpid())) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace dtrain::test
