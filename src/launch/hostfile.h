// The hosts of a multi-node job: a DeepSpeed hostfile (`HOST slots=N` per line, `#` comments, blank
// lines) or a `--hosts a,b` list. Each host runs one node's agent, in the order listed.
#pragma once
#include <string>
#include <vector>

namespace dtrain {

struct Host {
  std::string name;  // as ssh takes it: a name, an address or user@name
  int slots = 1;     // ranks on that host
  std::string where; // "FILE:LINE" or "--hosts", for messages about it
};

// Parses a hostfile's text; `file` names it in errors ("hosts.txt:3: ..."). Throws std::invalid_argument
// on a malformed line, a host listed twice, slots below 1, slots that differ between hosts (every
// node runs the same number of ranks) or a file without hosts.
std::vector<Host> parse_hostfile(const std::string& text, const std::string& file);
// Reads and parses the hostfile at `path`.
std::vector<Host> read_hostfile(const std::string& path);
// `--hosts a,b`: each host with `slots` ranks.
std::vector<Host> parse_host_list(const std::string& list, int slots);

// The address a host's name reaches it by: the name without a `user@`.
std::string host_address(const std::string& name);

}  // namespace dtrain
