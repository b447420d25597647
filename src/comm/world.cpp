#include "comm/world.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <torch/cuda.h>

#include "comm/hierarchical_backend.h"
#include "comm/shm/shm_backend.h"
#include "common/host_name.h"
#include "common/store_bytes.h"
#include "launch/host_capacity.h"
#include "launch/tcp_store.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <stdexcept>
#include <thread>

namespace dtrain {
namespace {

#ifdef USE_C10D_NCCL
constexpr bool kHaveNccl = true;
#else
constexpr bool kHaveNccl = false;
#endif

}  // namespace

std::string backend_missing_from_build(const std::string& requested) {
  if (requested == "nccl" && !kHaveNccl)
    return "dist.backend=nccl, but this build of dtrain has no NCCL (it links a CPU-only LibTorch); use dist.backend=gloo or auto";
  return "";
}

namespace {

// A CUDA build with a GPU puts each rank on one (LOCAL_RANK modulo the GPUs, so ranks can share a
// GPU on a small machine); otherwise the rank computes on the CPU.
at::Device choose_device(const WorkerEnv& env) {
  if (!kHaveNccl || !torch::cuda::is_available()) return at::Device(at::kCPU);
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank % torch::cuda::device_count()));
}

// NCCL needs a GPU of its own per rank; Gloo serves CPU tensors and, through host memory, CUDA tensors
// of ranks that share a GPU. "shm" is auto's choice on the CPU: shared memory within a node, Gloo
// across nodes.
std::string choose_backend(const std::string& requested, const at::Device& device, const WorkerEnv& env) {
  const bool gpu_per_rank = device.is_cuda() && env.local_world_size <= int(torch::cuda::device_count());
  if (requested == "auto") return gpu_per_rank ? "nccl" : device.is_cuda() ? "gloo" : "shm";
  if (const std::string missing = backend_missing_from_build(requested); !missing.empty()) throw std::invalid_argument(missing);
  if (requested == "gloo") return requested;
  if (requested == "shm") {
    if (device.is_cuda())
      throw std::invalid_argument("dist.backend=shm serves ranks that compute on the CPU, and this rank computes on a GPU; "
                                  "use dist.backend=auto, gloo or nccl");
    return requested;
  }
  if (requested == "nccl") {
    if (!gpu_per_rank)
      throw std::invalid_argument("dist.backend=nccl needs one GPU per rank, but this node runs " +
                                  std::to_string(env.local_world_size) + " rank(s) (LOCAL_WORLD_SIZE) on " +
                                  std::to_string(device.is_cuda() ? torch::cuda::device_count() : 0) +
                                  " GPU(s); use dist.backend=gloo or auto");
    return requested;
  }
  throw std::invalid_argument("dist.backend='" + requested + "' is not one of auto, shm, gloo, nccl");
}

c10::intrusive_ptr<c10d::Store> connect_store(const WorkerEnv& env, bool server, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(env.master_port);
  o.isServer = server;
  o.waitWorkers = false;
  o.timeout = timeout;
  const std::string where = env.master_addr + ":" + std::to_string(env.master_port);
  try {
    return open_tcp_store(env.master_addr, o);
  } catch (const std::exception& e) {
    if (server)
      throw std::runtime_error("rank " + std::to_string(env.rank) + ": cannot host the rendezvous store at " + where +
                               " (MASTER_ADDR:MASTER_PORT): " + e.what());
    throw std::runtime_error("rank " + std::to_string(env.rank) + ": waited " + std::to_string(timeout.count() / 1000) +
                             "s (dist.timeout_s) for " + (env.agent_store ? "the launcher's" : "rank 0's") +
                             " rendezvous store at " + where + " (MASTER_ADDR:MASTER_PORT): " + e.what());
  }
}

// Which interface Gloo binds: GLOO_SOCKET_IFNAME as in PyTorch, loopback for single-host jobs,
// otherwise the address this host's name resolves to.
std::shared_ptr<::gloo::transport::Device> gloo_device(const WorkerEnv& env) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"))
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  if (env.master_addr == "localhost" || env.master_addr.rfind("127.", 0) == 0)
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

// What tells this rank's node from the others: the node the launcher named on its host, or under
// mpirun, which names none, the host alone.
std::string node_identity(const WorkerEnv& env) {
  return host_name() + (env.node_rank ? "/node " + std::to_string(*env.node_rank) : "");
}

std::string rendezvous_key(int rank) { return "rendezvous/" + std::to_string(rank); }

}  // namespace

std::shared_ptr<World> World::init(const WorldOptions& options, const WorkerEnv& env) {
  std::shared_ptr<World> w(new World());
  w->env_ = env;
  w->options_ = options;
  w->device_ = choose_device(env);
  w->backend_ = choose_backend(options.backend, w->device_, env);
  w->log_ = std::make_shared<CollectiveLog>();

  if (env.world_size == 1 && !env.agent_store) {
    // A world of one talks to nobody: no port, no server. Under the launcher it still uses the
    // launcher's store, where the trainer tells the agent its run directory.
    w->store_ = c10::make_intrusive<c10d::HashStore>();
  } else {
    w->store_ = c10::make_intrusive<c10d::PrefixStore>(
        job_store_prefix(env.restart_count), connect_store(env, !env.agent_store && env.rank == 0, options.timeout));
  }
  w->diagnosis_ = std::make_shared<HangDiagnosis>(w->store_, w->another_store_connection(), env.rank, w->log_);

  if (env.world_size > 1) w->rendezvous();
  std::vector<int> all(env.world_size);
  for (int r = 0; r < env.world_size; ++r) all[r] = r;
  w->world_group_ = w->new_group("world", all);
  return w;
}

void World::rendezvous() {
  store_->set(rendezvous_key(rank()), as_bytes(node_identity(env_)));
  store_->add("rendezvous/joined", 1);
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  bool told = false;
  while (store_->add("rendezvous/joined", 0) < size()) {
    const auto waited = Clock::now() - start;
    if (waited > options_.timeout)
      throw std::runtime_error("rank " + std::to_string(rank()) + ": " + waiting_for() + ": timed out after " +
                               std::to_string(options_.timeout.count() / 1000) + "s (dist.timeout_s)");
    // Starting ranks arrive within seconds; one that has not by then may never come, so say whom this
    // rank waits for, once, rather than hang in silence until the timeout.
    if (!told && waited > std::chrono::seconds(5)) {
      std::cerr << "dtrain: rank " << rank() << ": " << waiting_for() << std::endl;
      told = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Nodes numbered in the order of their lowest rank, the same on every rank.
  std::map<std::string, int> node_numbers;
  node_of_.resize(size());
  for (int r = 0; r < size(); ++r) {
    const auto identity = as_string(store_->get(rendezvous_key(r)));
    node_of_[r] = node_numbers.emplace(identity, int(node_numbers.size())).first->second;
  }
}

std::string World::waiting_for() const {
  std::vector<int> missing;
  for (int r = 0; r < size(); ++r)
    if (!store_->check({rendezvous_key(r)})) missing.push_back(r);
  std::string what = "waiting for rank" + std::string(missing.size() == 1 ? " " : "s ") + format_ranks(missing);
  // The launcher gives each node the same number of consecutive ranks.
  if (env_.source == "torchrun" && size() > env_.local_world_size) {
    std::vector<int> nodes;
    for (int r : missing)
      if (nodes.empty() || nodes.back() != r / env_.local_world_size) nodes.push_back(r / env_.local_world_size);
    what += " (node" + std::string(nodes.size() == 1 ? " " : "s ") + format_ranks(nodes) + ")";
  }
  return what + " of a world of " + std::to_string(size()) + " to join at " + env_.master_addr + ":" +
         std::to_string(env_.master_port) + " (MASTER_ADDR:MASTER_PORT)";
}

c10::intrusive_ptr<c10d::Backend> World::make_backend(const std::string& key, const std::vector<int>& ranks, int rank) {
  if (backend_ == "shm") {
    std::vector<int> nodes;
    for (int r : ranks) nodes.push_back(node_of_.at(r));
    const NodeLayout layout = NodeLayout::of(nodes, rank);
    if (layout.members.size() == 1) {
      shm::ShmGroupOptions o;
      o.segment_name = "/" + shared_memory_prefix(env_.master_addr, env_.master_port, env_.restart_count) + name_hash(key);
      o.global_ranks = ranks;
      o.timeout = options_.timeout;
      o.chunk_bytes = options_.shm_chunk_bytes;
      o.oversubscribed = env_.local_world_size > usable_cores();
      return c10::make_intrusive<shm::ShmBackend>(prefixed_store(key), rank, o);
    }
    if (layout.hierarchical()) return make_hierarchical(key, ranks, layout);
    // One member per node, or nodes with different counts: one flat Gloo group.
  }
#ifdef USE_C10D_NCCL
  if (backend_ == "nccl") {
    auto o = c10d::ProcessGroupNCCL::Options::create();
    o->timeout = options_.timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed_store(key), rank, int(ranks.size()), o);
  }
#endif
  return make_gloo(key, int(ranks.size()), rank);
}

c10::intrusive_ptr<c10d::Store> World::another_store_connection() const {
  if (env_.world_size == 1 && !env_.agent_store) return store_;
  return c10::make_intrusive<c10d::PrefixStore>(job_store_prefix(env_.restart_count), connect_store(env_, false, options_.timeout));
}

c10::intrusive_ptr<c10d::Store> World::prefixed_store(const std::string& key) const {
  return c10::make_intrusive<c10d::PrefixStore>("pg/" + key, store_);
}

c10::intrusive_ptr<c10d::Backend> World::make_gloo(const std::string& key, int size, int rank) const {
  auto o = c10d::ProcessGroupGloo::Options::create();
  o->timeout = options_.timeout;
  o->devices.push_back(gloo_device(env_));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed_store(key), rank, size, o);
}

// Every member builds its node's group, then its column's, then the flat one: each step waits only
// for members that reach the same step, so the order cannot deadlock.
c10::intrusive_ptr<c10d::Backend> World::make_hierarchical(const std::string& key, const std::vector<int>& ranks,
                                                           const NodeLayout& layout) {
  auto global = [&](const std::vector<int>& group_ranks) {
    std::vector<int> g;
    for (int r : group_ranks) g.push_back(ranks[r]);
    return g;
  };
  std::vector<int> column;
  for (const auto& node : layout.members) column.push_back(node[layout.local]);
  const int rank = layout.members[layout.node][layout.local];
  HierarchicalBackend::Levels levels;
  levels.node = make_backend(key + "/node" + std::to_string(layout.node), global(layout.members[layout.node]), layout.local);
  levels.across = make_backend(key + "/across" + std::to_string(layout.local), global(column), layout.node);
  levels.flat = make_gloo(key, int(ranks.size()), rank);
  return c10::make_intrusive<HierarchicalBackend>(rank, layout, levels);
}

std::shared_ptr<Group> World::new_group(const std::string& name, const std::vector<int>& ranks) {
  for (int r : ranks)
    if (r < 0 || r >= size())
      throw std::invalid_argument("group " + name + ": rank " + std::to_string(r) + " is outside the world of " +
                                  std::to_string(size()));
  auto me = std::find(ranks.begin(), ranks.end(), rank());
  if (me == ranks.end()) return nullptr;
  const int group_rank = static_cast<int>(me - ranks.begin());
  const std::string key = name + ":" + format_ranks(ranks);
  c10::intrusive_ptr<c10d::Backend> backend;
  if (auto shared = backends_.find(ranks); shared != backends_.end()) backend = shared->second.lock();
  if (ranks.size() > 1 && !backend) {
    try {
      backend = make_backend(key, ranks, group_rank);
      backends_.insert_or_assign(ranks, c10::weak_intrusive_ptr<c10d::Backend>(backend));
    } catch (const std::exception& e) {
      std::string what = e.what();
      throw std::runtime_error("rank " + std::to_string(rank()) + ": creating process group " + name + " (ranks " +
                               format_ranks(ranks) + ") failed: " + what.substr(0, what.find('\n')));
    }
  }
  return std::make_shared<Group>(name, ranks, rank(), backend, options_.timeout, log_, diagnosis_);
}

}  // namespace dtrain
