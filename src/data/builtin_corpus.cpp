#include "data/builtin_corpus.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "common/byte_words.h"
#include "common/printable.h"
#include "common/regular_file.h"

namespace dtrain {

namespace {

bool is_regular_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The fortune files of `dir` in name order; their .dat indexes and .u8 links left out.
std::vector<std::string> fortune_files(const std::string& dir) {
  std::vector<std::string> files;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      auto ends = [&name](const char* suffix) {
        size_t n = std::strlen(suffix);
        return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
      };
      if (name[0] == '.' || ends(".dat") || ends(".u8")) continue;
      if (is_regular_file(dir + "/" + name)) files.push_back(dir + "/" + name);
    }
    ::closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Sentences from a fixed vocabulary.
std::string synthetic_corpus() {
  const char* subjects[] = {"The cat", "A dog", "The old man", "My friend", "The computer", "A small bird"};
  const char* verbs[] = {"sees", "likes", "finds", "remembers", "builds", "follows"};
  const char* objects[] = {"the river.", "a red house.", "the quiet road.", "an open door.", "the morning sun."};
  std::string text;
  uint64_t x = 42;
  auto next = [&x](int n) { x = x * 6364136223846793005ULL + 1442695040888963407ULL; return int((x >> 33) % n); };
  while (text.size() < (1u << 20)) {
    text += subjects[next(6)];
    text += ' ';
    text += verbs[next(6)];
    text += ' ';
    text += objects[next(5)];
    text += next(4) == 0 ? "\n" : " ";
  }
  return text;
}

}  // namespace

std::string builtin_corpus_dir() {
  const char* dir = std::getenv("DTRAIN_FORTUNES_DIR");
  return dir && *dir ? dir : "/usr/share/games/fortunes";
}

BuiltinCorpus read_builtin_corpus() {
  const std::string dir = builtin_corpus_dir();
  const std::vector<std::string> files = fortune_files(dir);
  if (files.empty())
    return {synthetic_corpus(), "built-in synthetic corpus", "1 MB",
            "the fortunes package is missing (no text in " + dir +
                "); training on a synthetic corpus instead (scripts/setup.sh installs fortunes)"};
  // Fortune files separate entries with lines holding only "%"; a blank line reads better.
  std::string text;
  for (const auto& f : files) {
    FileContents file = read_regular_file(f);
    if (!file.problem.empty()) throw std::runtime_error("data.source: fortune file '" + printable(f) + "' " + file.problem);
    std::istringstream lines(file.bytes);
    for (std::string line; std::getline(lines, line);) text += (line == "%" ? "" : line) + "\n";
  }
  std::string detail = std::to_string(files.size()) + " fortune files, " + byte_words(text.size());
  return {std::move(text), "built-in corpus", std::move(detail), ""};
}

}  // namespace dtrain
