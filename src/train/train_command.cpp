#include "train/train_command.h"

#include <iostream>

namespace dtrain {
int train_command(int, char**) {
  std::cerr << "dtrain: this command is not implemented yet\n";
  return 2;
}
}  // namespace dtrain
