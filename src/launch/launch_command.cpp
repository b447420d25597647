#include "launch/launch_command.h"

#include "launch/agent.h"
#include "launch/launch_options.h"

namespace dtrain {

int launch_command(int argc, char** argv) {
  LaunchOptions options;
  int exit_code = 0;
  if (!parse_launch_options(argc, argv, &options, &exit_code)) return exit_code;
  return Agent(options).run();
}

}  // namespace dtrain
