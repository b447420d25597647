#include "ckpt/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace dtrain {

namespace {
[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw std::runtime_error("cannot " + what + " '" + path + "': " + std::strerror(errno));
}
}  // namespace

DurableFile::DurableFile(const std::string& path) : path_(path), file_(std::fopen(path.c_str(), "wb")) {
  if (!file_) fail("create", path);
}

DurableFile::~DurableFile() {
  if (file_) std::fclose(file_);
}

void DurableFile::write(const void* data, size_t bytes) {
  if (bytes && std::fwrite(data, 1, bytes, file_) != bytes) fail("write", path_);
}

void DurableFile::close() {
  if (std::fflush(file_) != 0 || ::fsync(fileno(file_)) != 0) fail("flush", path_);
  const int rc = std::fclose(file_);
  file_ = nullptr;
  if (rc != 0) fail("close", path_);
}

void fsync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) fail("open directory", dir);
  ::fsync(fd);
  ::close(fd);
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  try {
    DurableFile f(tmp);
    f.write(text.data(), text.size());
    f.close();
    if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("rename into", path);
  } catch (...) {
    // A full disk fails the write, not the creation: what it leaves is an empty or cut temporary
    // file, which no reader wants and every later failure would leave again.
    std::remove(tmp.c_str());
    throw;
  }
  const auto slash = path.find_last_of('/');
  fsync_directory(slash == std::string::npos ? "." : path.substr(0, slash));
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("read", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json read_json_file(const std::string& path) {
  const std::string text = read_text_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw NotJson(std::string("is not valid JSON (") + e.what() + ")");
  }
}

}  // namespace dtrain
