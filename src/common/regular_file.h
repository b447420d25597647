// Reading a file that a user named (a config, a text corpus, a token shard), refusing what is not a
// regular file before opening it: a FIFO blocks the open until a writer comes, a device such
// as /dev/zero never ends, and a directory opens but reads as nothing, which parsers then report
// as "empty" or "invalid" instead of saying what the path is.
#pragma once
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

namespace dtrain {

struct FileContents {
  std::string bytes;
  // Empty when the file was read; otherwise what is wrong, worded to follow the file's name:
  // "does not exist", "is a directory", "is a FIFO, not a regular file", "cannot be read: ...".
  std::string problem;
};

// Empty when `path` is a regular file; otherwise what it is, worded as FileContents::problem.
inline std::string regular_file_problem(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return "does not exist";
    if (errno == ENOTDIR) return "does not exist (a part of its path is not a directory)";
    return std::string("cannot be read: ") + std::strerror(errno);
  }
  if (S_ISDIR(st.st_mode)) return "is a directory";
  if (S_ISFIFO(st.st_mode)) return "is a FIFO, not a regular file";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "is a device, not a regular file";
  if (S_ISSOCK(st.st_mode)) return "is a socket, not a regular file";
  return "";
}

inline FileContents read_regular_file(const std::string& path) {
  if (std::string problem = regular_file_problem(path); !problem.empty()) return {"", std::move(problem)};
  std::ifstream in(path, std::ios::binary);
  if (!in) return {"", std::string("cannot be read: ") + std::strerror(errno)};
  std::ostringstream bytes;
  bytes << in.rdbuf();  // sets failbit on `bytes` when the file is empty, which is no error
  return {bytes.str(), ""};
}

}  // namespace dtrain
