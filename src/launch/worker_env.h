// Where a worker learns its place in the job: the torchrun env contract, or the same values derived
// from mpirun (OMPI_COMM_WORLD_*) or srun (SLURM_*) env, so cluster engines can start dtrain directly.
#pragma once
#include <map>
#include <optional>
#include <string>

namespace dtrain {

struct WorkerEnv {
  int rank = 0;              // global rank
  int local_rank = 0;        // rank within this node
  int world_size = 1;        // all ranks of the job
  int local_world_size = 1;  // ranks on this node
  // Which node, when the launcher says (GROUP_RANK, SLURM_NODEID). mpirun names none (its
  // OMPI_COMM_WORLD_NODE_RANK is the rank among the node's processes): the world then groups its
  // ranks into nodes by host name at rendezvous (comm/world.h).
  std::optional<int> node_rank;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int restart_count = 0;     // DTRAIN_RESTART_COUNT: how many times the job has been restarted
  bool agent_store = false;  // the launcher hosts the store; otherwise rank 0 does
  // An elastic agent's word on the round before (docs/launch.md): its world size
  // (DTRAIN_PREVIOUS_WORLD_SIZE) and when it ended (DTRAIN_FAILURE_TIME, Unix seconds); absent in a first round.
  std::optional<int> previous_world_size;
  std::optional<double> failure_time;
  std::string source = "single";  // "torchrun" | "mpi" | "slurm" | "single"
};

using EnvMap = std::map<std::string, std::string>;

// Where a job's workers keep their keys in the store during restart `restart_count`, so a restarted
// job never reads a key the previous attempt left; the agent reads what they publish there.
std::string job_store_prefix(int restart_count);

// What the names of a job's shared-memory segments in /dev/shm start with during restart
// `restart_count`: "dtrain-<job>-r<restart>-", where the job is told by its rendezvous address, which
// no two live jobs share. A worker appends its group; the agent removes what a failed round left.
std::string shared_memory_prefix(const std::string& master_addr, int master_port, int restart_count);

// Removes every /dev/shm name that starts with `prefix`: what workers killed while they created their
// groups' segments left. Returns how many it removed.
int remove_shared_memory(const std::string& prefix);

// A short stable hash, in hex, for names built from arbitrary text.
std::string name_hash(const std::string& text);

// The current process environment as a map.
EnvMap current_env();

// Reads the torchrun contract first, then OpenMPI, then Slurm; none of them means a world of 1.
// Throws std::invalid_argument naming the variable when a value is malformed or inconsistent.
WorkerEnv derive_worker_env(const EnvMap& env);

}  // namespace dtrain
