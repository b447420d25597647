// `dtrain pipeline show`: a pipeline schedule's simulated timeline, bubble and activations per rank.
#pragma once

namespace dtrain {
// argv[0] is the subcommand name. Returns the process exit code.
int pipeline_command(int argc, char** argv);
}  // namespace dtrain
