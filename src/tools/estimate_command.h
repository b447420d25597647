// `dtrain estimate`: how much memory each rank of a config's run takes, term by term, and whether it
// fits the device (tools/estimate/memory_estimate.h has the formulas).
#pragma once

namespace dtrain {
// argv[0] is the subcommand name. Returns the process exit code.
int estimate_command(int argc, char** argv);
}  // namespace dtrain
