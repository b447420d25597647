#include "launch/hostfile.h"

#include <fstream>
#include <cctype>
#include <sstream>
#include <stdexcept>

#include "common/printable.h"

namespace dtrain {
namespace {

// Refused, so that a host name can never be read as an option of ssh or of a remote shell command.
std::string host_name_problem(const std::string& name) {
  if (name.empty()) return "an empty host name";
  if (name[0] == '-') return "'" + printable(name) + "' is not a host name (it starts with '-')";
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::string("._-@:").find(c) == std::string::npos)
      return "'" + printable(name) + "' is not a host name (letters, digits and . _ - @ : only)";
  return "";
}

// Adds `host` to `hosts` unless its name is bad or already listed; throws naming `host.where`.
void add_host(std::vector<Host>& hosts, Host host) {
  if (auto problem = host_name_problem(host.name); !problem.empty())
    throw std::invalid_argument(host.where + ": " + problem);
  for (const auto& h : hosts)
    if (h.name == host.name)
      throw std::invalid_argument(host.where + ": host " + host.name + " is listed twice (first at " + h.where + ")");
  // The agents check at rendezvous that every node runs as many ranks; say it here, naming the line.
  if (!hosts.empty() && hosts[0].slots != host.slots)
    throw std::invalid_argument(host.where + ": " + host.name + " has slots=" + std::to_string(host.slots) + " but " +
                             hosts[0].name + " (" + hosts[0].where + ") has slots=" + std::to_string(hosts[0].slots) +
                             ": every node runs the same number of ranks");
  hosts.push_back(std::move(host));
}

int parse_slots(const std::string& text, const std::string& where) {
  const std::string digits = text.substr(6);  // after "slots="
  const bool whole = !digits.empty() && digits.size() <= 6 && digits.find_first_not_of("0123456789") == std::string::npos;
  const int slots = whole ? std::stoi(digits) : 0;
  if (slots < 1)
    throw std::invalid_argument(where + ": slots must be a whole number from 1 to 999999, got '" + printable(text) + "'");
  return slots;
}

}  // namespace

std::vector<Host> parse_hostfile(const std::string& text, const std::string& file) {
  std::vector<Host> hosts;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const std::string where = file + ":" + std::to_string(number);
    std::istringstream words(line.substr(0, line.find('#')));
    std::vector<std::string> word;
    for (std::string w; words >> w;) word.push_back(w);
    if (word.empty()) continue;
    if (word.size() != 2 || word[1].rfind("slots=", 0) != 0)
      throw std::invalid_argument(where + ": expected 'HOST slots=N', got '" + printable(line) + "'");
    add_host(hosts, Host{word[0], parse_slots(word[1], where), where});
  }
  if (hosts.empty()) throw std::invalid_argument(file + ": no hosts in it (one 'HOST slots=N' per line)");
  return hosts;
}

std::vector<Host> read_hostfile(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::invalid_argument("cannot read the hostfile " + printable(path) + " (--hostfile)");
  std::stringstream text;
  text << f.rdbuf();
  return parse_hostfile(text.str(), path);
}

std::vector<Host> parse_host_list(const std::string& list, int slots) {
  std::vector<Host> hosts;
  std::istringstream names(list);
  for (std::string name; std::getline(names, name, ',');) add_host(hosts, Host{name, slots, "--hosts"});
  if (hosts.empty()) throw std::invalid_argument("--hosts: no hosts in '" + printable(list) + "'");
  return hosts;
}

std::string host_address(const std::string& name) { return name.substr(name.find('@') + 1); }

}  // namespace dtrain
