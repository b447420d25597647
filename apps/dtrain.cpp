// The one dtrain binary: a thin dispatch from the subcommand to the module that owns it.
#include <c10/util/Exception.h>
#include <signal.h>

#include <cstring>
#include <iostream>

#include "launch/launch_command.h"
#include "launch/worker_process.h"
#include "tools/bench_comm_command.h"
#include "tools/estimate_command.h"
#include "tools/export_command.h"
#include "tools/generate_command.h"
#include "tools/pipeline_show_command.h"
#include "tools/prepare_command.h"
#include "train/config_command.h"
#include "train/run_command.h"
#include "train/train_command.h"
#include "train/train_config.h"

namespace {
struct Command {
  const char* name;
  int (*main)(int, char**);
  const char* help;
};

const Command kCommands[] = {
    {"run", dtrain::run_command, "launch local ranks and train (the demo with no arguments)"},
    {"launch", dtrain::launch_command, "start and supervise the workers of one node"},
    {"train", dtrain::train_command, "train as one rank of a launched job"},
    {"generate", dtrain::generate_command, "sample text from a checkpoint"},
    {"export", dtrain::export_command, "write a checkpoint as a Hugging Face model (--format hf)"},
    {"prepare", dtrain::prepare_command, "tokenize a text corpus once into token shards (bin:)"},
    {"config", dtrain::config_command, "config check: resolve and validate a config"},
    {"estimate", dtrain::estimate_command, "memory per rank, term by term, and whether it fits"},
    {"bench-comm", dtrain::bench_comm_command, "collective bandwidth table (run under launch)"},
    {"pipeline", dtrain::pipeline_command, "pipeline show: a schedule's timeline, bubble and activations per rank"},
};

void print_usage(std::ostream& out) {
  out << "usage: dtrain <command> [options]   (dtrain <command> --help for its options)\n\ncommands:\n";
  for (const auto& c : kCommands) out << "  " << c.name << std::string(12 - std::strlen(c.name), ' ') << c.help << "\n";
}
}  // namespace

int main(int argc, char** argv) {
  // A write to a peer that died (gloo writes its sockets without MSG_NOSIGNAL) or to a closed output
  // pipe fails with EPIPE, which the collective or the stream reports, instead of killing the process
  // without a word; Python does the same for PyTorch jobs. Children get the default back before exec.
  signal(SIGPIPE, SIG_IGN);
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    print_usage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? 2 : 0;
  }
  for (const auto& c : kCommands) {
    if (!std::strcmp(argv[1], c.name)) {
      try {
        return c.main(argc - 1, argv + 1);
      } catch (const dtrain::ConfigError& e) {  // the same input would be refused again: the launcher does not restart
        std::cerr << "dtrain " << c.name << ": error: " << e.what() << "\n";
        return dtrain::kRefusedInputExitCode;
      } catch (const c10::Error& e) {  // LibTorch's own: its message without the C++ backtrace
        std::cerr << "dtrain " << c.name << ": error: " << e.what_without_backtrace() << "\n";
        return 1;
      } catch (const std::exception& e) {
        std::cerr << "dtrain " << c.name << ": error: " << e.what() << "\n";
        return 1;
      }
    }
  }
  std::cerr << "dtrain: unknown command '" << argv[1] << "'\n";
  print_usage(std::cerr);
  return 2;
}
