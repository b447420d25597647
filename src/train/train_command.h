// Train one rank (run under `dtrain launch`, mpirun or srun).
#pragma once

namespace dtrain {
// argv[0] is the subcommand name. Returns the process exit code.
int train_command(int argc, char** argv);
}  // namespace dtrain
