// Parsing a subcommand's flags the way every dtrain command answers: 0 after --help, 2 on a usage
// error (CLI11's own codes, 105 and the like, mean nothing to a shell script), having printed
// CLI11's message either way.
#pragma once
#include <CLI/CLI.hpp>

#include <optional>

namespace dtrain {

// The exit code to return at once, or nullopt to go on with the parsed flags.
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return std::nullopt;
}

}  // namespace dtrain
