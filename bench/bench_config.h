// The config a bench program measures, or its error and exit code 2, as dtrain's own commands give.
#pragma once
#include <cstdlib>
#include <iostream>
#include <string>

#include "train/train_config.h"

inline dtrain::TrainConfig load_bench_config(const std::string& path, const std::string& program) {
  try {
    return dtrain::load_train_config(path, {}, 1);
  } catch (const std::exception& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    std::exit(2);
  }
}
