// Launch local ranks and train: the demo with no arguments.
#pragma once

namespace dtrain {
// argv[0] is the subcommand name. Returns the process exit code.
int run_command(int argc, char** argv);
}  // namespace dtrain
