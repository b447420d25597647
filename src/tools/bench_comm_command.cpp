#include "tools/bench_comm_command.h"

#include <iostream>

namespace dtrain {
int bench_comm_command(int, char**) {
  std::cerr << "dtrain: this command is not implemented yet\n";
  return 2;
}
}  // namespace dtrain
