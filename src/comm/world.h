// The job as this rank sees it: its place (from the launcher's env, or mpirun's, or srun's), the
// store every rank shares, the backend and the world group. On the CPU a group whose members share
// a node talks through shared memory (comm/shm); one spanning nodes with as many members on each
// runs in two levels (comm/hierarchical_backend.h); any other uses Gloo. CUDA builds use NCCL.
#pragma once
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/group.h"
#include "comm/hierarchical_backend.h"
#include "launch/worker_env.h"

namespace dtrain {

// Why this build of dtrain cannot serve dist.backend `requested` on any machine ("" when it can):
// NCCL needs a CUDA build.
std::string backend_missing_from_build(const std::string& requested);

struct WorldOptions {
  std::string backend = "auto";                 // auto | shm | gloo | nccl (dist.backend); World::backend() says what auto chose
  std::chrono::milliseconds timeout{300000};    // every group's collective timeout (dist.timeout_s)
  int64_t shm_chunk_bytes = 1 << 19;            // each rank's shared-memory buffer half (comm/shm)
};

class World {
 public:
  // Connects the store (a client of the launcher's when env.agent_store, otherwise rank 0 hosts it
  // on master_addr:master_port), keys under "dtrain/r<restart>/", and creates the world group.
  static std::shared_ptr<World> init(const WorldOptions& options, const WorkerEnv& env);

  int rank() const { return env_.rank; }
  int size() const { return env_.world_size; }
  int local_rank() const { return env_.local_rank; }
  const WorkerEnv& env() const { return env_; }
  const std::string& backend() const { return backend_; }
  at::Device device() const { return device_; }
  std::shared_ptr<Group> world_group() const { return world_group_; }
  c10::intrusive_ptr<c10d::Store> store() const { return store_; }
  // A connection of its own to the same store, under the same prefix, for a thread that waits on the
  // store while this rank's others use it: a c10d TCPStore client runs one operation at a time, and
  // holds its connection for the whole of a wait. A world of one without a launcher shares its
  // in-process store, whose waits hold nothing.
  c10::intrusive_ptr<c10d::Store> another_store_connection() const;

  // A group of the given global ranks. Every rank of the world calls it, in the same order, with
  // the same arguments (as c10d requires); ranks outside `ranks` get nullptr. A group of one rank has
  // no backend; one of the same ranks, in the same order, as a group still alive shares its backend
  // (a communicator costs connections or shared memory, and the mesh names one set of ranks several
  // ways: a pure data-parallel job's dp_shard, dp and dp_cp are the world). Each keeps its own name
  // and sequence of collectives; every member issues them in the same order on both, so the shared
  // backend sees one order.
  std::shared_ptr<Group> new_group(const std::string& name, const std::vector<int>& ranks);

 private:
  World() = default;
  // Shared memory for members on one node, two levels for equal counts on several nodes, otherwise
  // Gloo (or NCCL on GPUs).
  c10::intrusive_ptr<c10d::Backend> make_backend(const std::string& key, const std::vector<int>& ranks, int rank);
  c10::intrusive_ptr<c10d::Backend> make_gloo(const std::string& key, int size, int rank) const;
  c10::intrusive_ptr<c10d::Backend> make_hierarchical(const std::string& key, const std::vector<int>& ranks,
                                                      const NodeLayout& layout);
  c10::intrusive_ptr<c10d::Store> prefixed_store(const std::string& key) const;
  // Every rank says where it runs, then waits for the others (dist.timeout_s); which node each rank
  // runs on follows, for groups that can use shared memory: the node its launcher named on its host,
  // or its host where the launcher names none (mpirun).
  void rendezvous();
  // "waiting for rank 1 (node 1) of a world of 2 to join at HOST:PORT ...": the ranks not seen yet.
  std::string waiting_for() const;

  WorkerEnv env_;
  WorldOptions options_;
  std::string backend_;
  at::Device device_{at::kCPU};
  c10::intrusive_ptr<c10d::Store> store_;
  std::shared_ptr<CollectiveLog> log_;
  std::shared_ptr<HangDiagnosis> diagnosis_;
  std::shared_ptr<Group> world_group_;
  std::vector<int> node_of_;  // by global rank
  // The backends of this rank's groups by their member lists, while a group uses them.
  std::map<std::vector<int>, c10::weak_intrusive_ptr<c10d::Backend>> backends_;
};

}  // namespace dtrain
