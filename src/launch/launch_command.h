// Start and supervise the workers of one node (torchrun's agent).
#pragma once

namespace dtrain {
// argv[0] is the subcommand name. Returns the process exit code.
int launch_command(int argc, char** argv);
}  // namespace dtrain
