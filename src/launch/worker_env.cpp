#include "launch/worker_env.h"

#include <sys/mman.h>

#include <cstdint>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "common/hash64.h"
#include "common/printable.h"

extern char** environ;

namespace dtrain {
namespace {

const std::string* find(const EnvMap& env, const std::string& key) {
  auto it = env.find(key);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

// `text` is the part of variable `key`'s value that must be an int.
int to_int(const std::string& key, const std::string& value, const std::string& text) {
  try {
    size_t used = 0;
    int x = std::stoi(text, &used);
    if (used != text.size()) throw std::invalid_argument(key);
    return x;
  } catch (const std::exception&) {
    throw std::invalid_argument("environment variable " + key + "='" + printable(value) + "' is not an integer");
  }
}

int parse_int(const EnvMap& env, const std::string& key, int fallback) {
  const std::string* v = find(env, key);
  return v ? to_int(key, *v, *v) : fallback;
}

double parse_unix_time(const EnvMap& env, const std::string& key) {
  const std::string& v = *find(env, key);
  char* end = nullptr;
  const double t = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(t > 0))
    throw std::invalid_argument("environment variable " + key + "='" + printable(v) + "' is not a Unix time in seconds");
  return t;
}

// Slurm writes tasks per node as e.g. "4" or "4(x2),3"; the first count is ours when homogeneous.
int parse_slurm_tasks_per_node(const std::string& key, const std::string& v) {
  return to_int(key, v, v.substr(0, v.find_first_of("(,")));
}

}  // namespace

std::string name_hash(const std::string& text) {
  const uint64_t h = fnv1a64(text);
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

int remove_shared_memory(const std::string& prefix) {
  int removed = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && shm_unlink(("/" + name).c_str()) == 0) ++removed;
  }
  return removed;
}

std::string shared_memory_prefix(const std::string& master_addr, int master_port, int restart_count) {
  return "dtrain-" + name_hash(master_addr + ":" + std::to_string(master_port)) + "-r" + std::to_string(restart_count) + "-";
}

std::string job_store_prefix(int restart_count) { return "dtrain/r" + std::to_string(restart_count); }

EnvMap current_env() {
  EnvMap env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

WorkerEnv derive_worker_env(const EnvMap& env) {
  WorkerEnv w;
  std::string node_rank_key;  // read once the local world size it defaults from is known to be valid
  if (find(env, "RANK") && find(env, "WORLD_SIZE")) {
    w.source = "torchrun";
    w.rank = parse_int(env, "RANK", 0);
    w.world_size = parse_int(env, "WORLD_SIZE", 1);
    w.local_rank = parse_int(env, "LOCAL_RANK", w.rank);
    w.local_world_size = parse_int(env, "LOCAL_WORLD_SIZE", w.world_size);
    node_rank_key = "GROUP_RANK";
  } else if (find(env, "OMPI_COMM_WORLD_RANK")) {
    w.source = "mpi";
    w.rank = parse_int(env, "OMPI_COMM_WORLD_RANK", 0);
    w.world_size = parse_int(env, "OMPI_COMM_WORLD_SIZE", 1);
    w.local_rank = parse_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0);
    w.local_world_size = parse_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", w.world_size);
  } else if (find(env, "SLURM_PROCID") && find(env, "SLURM_NTASKS")) {
    w.source = "slurm";
    w.rank = parse_int(env, "SLURM_PROCID", 0);
    w.world_size = parse_int(env, "SLURM_NTASKS", 1);
    w.local_rank = parse_int(env, "SLURM_LOCALID", 0);
    if (const std::string* v = find(env, "SLURM_NTASKS_PER_NODE")) {
      w.local_world_size = parse_slurm_tasks_per_node("SLURM_NTASKS_PER_NODE", *v);
    } else if (const std::string* t = find(env, "SLURM_TASKS_PER_NODE")) {
      w.local_world_size = parse_slurm_tasks_per_node("SLURM_TASKS_PER_NODE", *t);
    } else {
      w.local_world_size = w.world_size;
    }
    node_rank_key = "SLURM_NODEID";
  }
  // The rendezvous address: explicit MASTER_* wins under every launcher. Under Slurm the first
  // host of the node list is the master when the job script did not export one.
  if (const std::string* a = find(env, "MASTER_ADDR")) {
    w.master_addr = *a;
  } else if (w.source == "slurm" && find(env, "SLURM_LAUNCH_NODE_IPADDR")) {
    w.master_addr = *find(env, "SLURM_LAUNCH_NODE_IPADDR");
  }
  w.master_port = parse_int(env, "MASTER_PORT", w.master_port);
  w.restart_count = parse_int(env, "DTRAIN_RESTART_COUNT", 0);
  w.agent_store = find(env, "DTRAIN_AGENT_STORE") && *find(env, "DTRAIN_AGENT_STORE") == "1";
  if (find(env, "DTRAIN_PREVIOUS_WORLD_SIZE")) {
    w.previous_world_size = parse_int(env, "DTRAIN_PREVIOUS_WORLD_SIZE", 0);
    if (*w.previous_world_size < 1)
      throw std::invalid_argument("DTRAIN_PREVIOUS_WORLD_SIZE=" + std::to_string(*w.previous_world_size) + " is not a world size");
  }
  if (find(env, "DTRAIN_FAILURE_TIME")) w.failure_time = parse_unix_time(env, "DTRAIN_FAILURE_TIME");

  if (w.world_size < 1) throw std::invalid_argument("world size must be >= 1, got " + std::to_string(w.world_size));
  if (w.rank < 0 || w.rank >= w.world_size)
    throw std::invalid_argument("rank " + std::to_string(w.rank) + " is outside world size " +
                                std::to_string(w.world_size) + " (from " + w.source + " env)");
  if (w.local_world_size < 1 || w.local_rank < 0 || w.local_rank >= w.local_world_size)
    throw std::invalid_argument("local rank " + std::to_string(w.local_rank) + " is outside local world size " +
                                std::to_string(w.local_world_size) + " (from " + w.source + " env)");
  if (w.master_port < 1 || w.master_port > 65535)
    throw std::invalid_argument("MASTER_PORT=" + std::to_string(w.master_port) + " is not a TCP port");
  // torchrun's and srun's ranks fill nodes in order when the variable is missing; mpirun's may not
  // (--map-by node deals them round-robin), so there the world asks each rank's host.
  if (!node_rank_key.empty()) w.node_rank = parse_int(env, node_rank_key, w.rank / w.local_world_size);
  else if (w.source == "single") w.node_rank = 0;
  return w;
}

}  // namespace dtrain
