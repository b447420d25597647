#include "launch/worker_env.h"

#include <stdexcept>

extern char** environ;

namespace dtrain {
namespace {

const std::string* find(const EnvMap& env, const std::string& key) {
  auto it = env.find(key);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

int parse_int(const EnvMap& env, const std::string& key, int fallback) {
  const std::string* v = find(env, key);
  if (!v) return fallback;
  try {
    size_t used = 0;
    int x = std::stoi(*v, &used);
    if (used != v->size()) throw std::invalid_argument(key);
    return x;
  } catch (const std::exception&) {
    throw std::invalid_argument("environment variable " + key + "='" + *v + "' is not an integer");
  }
}

// Slurm writes tasks per node as e.g. "4" or "4(x2),3"; the first count is ours when homogeneous.
int parse_slurm_tasks_per_node(const std::string& v) {
  return std::stoi(v.substr(0, v.find_first_of("(,")));
}

}  // namespace

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
  if (find(env, "RANK") && find(env, "WORLD_SIZE")) {
    w.source = "torchrun";
    w.rank = parse_int(env, "RANK", 0);
    w.world_size = parse_int(env, "WORLD_SIZE", 1);
    w.local_rank = parse_int(env, "LOCAL_RANK", w.rank);
    w.local_world_size = parse_int(env, "LOCAL_WORLD_SIZE", w.world_size);
    w.node_rank = parse_int(env, "GROUP_RANK", w.rank / w.local_world_size);
  } else if (find(env, "OMPI_COMM_WORLD_RANK")) {
    w.source = "mpi";
    w.rank = parse_int(env, "OMPI_COMM_WORLD_RANK", 0);
    w.world_size = parse_int(env, "OMPI_COMM_WORLD_SIZE", 1);
    w.local_rank = parse_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0);
    w.local_world_size = parse_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", w.world_size);
    w.node_rank = parse_int(env, "OMPI_COMM_WORLD_NODE_RANK", w.rank / w.local_world_size);
  } else if (find(env, "SLURM_PROCID") && find(env, "SLURM_NTASKS")) {
    w.source = "slurm";
    w.rank = parse_int(env, "SLURM_PROCID", 0);
    w.world_size = parse_int(env, "SLURM_NTASKS", 1);
    w.local_rank = parse_int(env, "SLURM_LOCALID", 0);
    if (const std::string* v = find(env, "SLURM_NTASKS_PER_NODE")) {
      w.local_world_size = parse_slurm_tasks_per_node(*v);
    } else if (const std::string* t = find(env, "SLURM_TASKS_PER_NODE")) {
      w.local_world_size = parse_slurm_tasks_per_node(*t);
    } else {
      w.local_world_size = w.world_size;
    }
    w.node_rank = parse_int(env, "SLURM_NODEID", w.rank / w.local_world_size);
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

  if (w.world_size < 1) throw std::invalid_argument("world size must be >= 1, got " + std::to_string(w.world_size));
  if (w.rank < 0 || w.rank >= w.world_size)
    throw std::invalid_argument("rank " + std::to_string(w.rank) + " is outside world size " +
                                std::to_string(w.world_size) + " (from " + w.source + " env)");
  if (w.local_world_size < 1 || w.local_rank < 0 || w.local_rank >= w.local_world_size)
    throw std::invalid_argument("local rank " + std::to_string(w.local_rank) + " is outside local world size " +
                                std::to_string(w.local_world_size) + " (from " + w.source + " env)");
  if (w.master_port < 1 || w.master_port > 65535)
    throw std::invalid_argument("MASTER_PORT=" + std::to_string(w.master_port) + " is not a TCP port");
  return w;
}

}  // namespace dtrain
