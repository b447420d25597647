// For the tests only: DTRAIN_LOG_SAMPLES=PREFIX makes every rank append the training samples it
// draws to PREFIX.rank<RANK>, one line per micro-batch: the epoch, then the sample indices. The
// data-position tests compare what a run interrupted at one number of ranks and resumed at another
// consumed with what an uninterrupted run consumed. Unset, a stream pays one getenv when it is built.
#pragma once
#include <cstdint>
#include <fstream>
#include <memory>
#include <vector>

namespace dtrain {

class SampleLog {
 public:
  // Null unless DTRAIN_LOG_SAMPLES is set; throws naming the file when it cannot be opened.
  static std::unique_ptr<SampleLog> from_env();
  void write(int64_t epoch, const std::vector<int64_t>& samples);

 private:
  std::ofstream out_;
};

}  // namespace dtrain
