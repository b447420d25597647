// Sample text from a checkpoint.
#pragma once

namespace dtrain {
// argv[0] is the subcommand name. Returns the process exit code.
int generate_command(int argc, char** argv);
}  // namespace dtrain
