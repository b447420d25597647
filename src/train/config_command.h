// `dtrain config check`: resolve and validate a config.
#pragma once

namespace dtrain {
// argv[0] is the subcommand name. Returns the process exit code.
int config_command(int argc, char** argv);
}  // namespace dtrain
