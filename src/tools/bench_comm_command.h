// Collective bandwidth table in the style of nccl-tests.
#pragma once

namespace dtrain {
// argv[0] is the subcommand name. Returns the process exit code.
int bench_comm_command(int argc, char** argv);
}  // namespace dtrain
