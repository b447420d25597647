// `dtrain prepare`: tokenize a text corpus once into llm.c token shards, which `data.source: bin:`
// then maps at every start instead of tokenizing again.
#pragma once

namespace dtrain {
// argv[0] is the subcommand name. Returns the process exit code.
int prepare_command(int argc, char** argv);
}  // namespace dtrain
