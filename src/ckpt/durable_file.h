// Files that survive a crash: written, fsynced, and (for the atomic forms) renamed into place, so a
// reader sees the old content or the new, never half of one.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace dtrain {

// A file being written; close() flushes and fsyncs, and throws naming the path on any failure.
class DurableFile {
 public:
  explicit DurableFile(const std::string& path);
  ~DurableFile();
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;
  void write(const void* data, size_t bytes);
  void close();

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

// Writes `text` to path.tmp, fsyncs, renames over `path`, fsyncs the directory. On failure it throws
// naming the file, and removes path.tmp: `path` keeps its old content and nothing else is left.
void write_file_atomically(const std::string& path, const std::string& text);
void fsync_directory(const std::string& dir);
std::string read_text_file(const std::string& path);
// Thrown by read_json_file for a file that is not JSON: "is not valid JSON (why)", for the caller to
// prefix with what the file is to it.
struct NotJson : std::runtime_error {
  using std::runtime_error::runtime_error;
};
nlohmann::json read_json_file(const std::string& path);

}  // namespace dtrain
