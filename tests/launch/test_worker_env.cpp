// Where a worker learns its place: torchrun's contract first, then mpirun's and srun's variables.
#include <gtest/gtest.h>

#include "launch/worker_env.h"

namespace dtrain {
namespace {

TEST(WorkerEnv, NoLauncherMeansAWorldOfOne) {
  WorkerEnv w = derive_worker_env({});
  EXPECT_EQ(w.source, "single");
  EXPECT_EQ(w.rank, 0);
  EXPECT_EQ(w.world_size, 1);
  EXPECT_FALSE(w.agent_store);
}

TEST(WorkerEnv, TorchrunContract) {
  WorkerEnv w = derive_worker_env({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"},
                                   {"GROUP_RANK", "1"}, {"MASTER_ADDR", "10.1.2.3"}, {"MASTER_PORT", "1234"},
                                   {"DTRAIN_RESTART_COUNT", "2"}, {"DTRAIN_AGENT_STORE", "1"}});
  EXPECT_EQ(w.source, "torchrun");
  EXPECT_EQ(w.rank, 5);
  EXPECT_EQ(w.world_size, 8);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.local_world_size, 4);
  EXPECT_EQ(w.node_rank, 1);
  EXPECT_EQ(w.master_addr, "10.1.2.3");
  EXPECT_EQ(w.master_port, 1234);
  EXPECT_EQ(w.restart_count, 2);
  EXPECT_TRUE(w.agent_store);
  EXPECT_FALSE(w.previous_world_size);
  EXPECT_FALSE(w.failure_time);
}

TEST(WorkerEnv, AnElasticRoundIsToldTheWorldBeforeAndWhenItEnded) {
  const WorkerEnv w = derive_worker_env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"DTRAIN_PREVIOUS_WORLD_SIZE", "4"},
                                         {"DTRAIN_FAILURE_TIME", "1795000000.250"}});
  EXPECT_EQ(w.previous_world_size, 4);
  EXPECT_EQ(w.failure_time, 1795000000.25);
}

TEST(WorkerEnv, OpenMpiVariables) {
  WorkerEnv w = derive_worker_env({{"OMPI_COMM_WORLD_RANK", "6"}, {"OMPI_COMM_WORLD_SIZE", "8"},
                                   {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                   {"OMPI_COMM_WORLD_NODE_RANK", "2"}, {"MASTER_ADDR", "node0"}});
  EXPECT_EQ(w.source, "mpi");
  EXPECT_EQ(w.rank, 6);
  EXPECT_EQ(w.world_size, 8);
  EXPECT_EQ(w.local_rank, 2);
  EXPECT_EQ(w.local_world_size, 4);
  // OMPI_COMM_WORLD_NODE_RANK is the rank among this node's processes, not the node's: mpirun names no
  // node, so the world groups ranks by host at rendezvous.
  EXPECT_FALSE(w.node_rank.has_value()) << *w.node_rank;
  EXPECT_EQ(w.master_addr, "node0");
  EXPECT_EQ(w.master_port, 29500);
  EXPECT_FALSE(w.agent_store);
}

TEST(WorkerEnv, SlurmVariables) {
  WorkerEnv w = derive_worker_env({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"},
                                   {"SLURM_TASKS_PER_NODE", "2(x2)"}, {"SLURM_NODEID", "1"},
                                   {"SLURM_LAUNCH_NODE_IPADDR", "10.0.0.7"}});
  EXPECT_EQ(w.source, "slurm");
  EXPECT_EQ(w.rank, 3);
  EXPECT_EQ(w.world_size, 4);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.local_world_size, 2);
  EXPECT_EQ(w.node_rank, 1);
  EXPECT_EQ(w.master_addr, "10.0.0.7");
}

TEST(WorkerEnv, TorchrunWinsOverMpi) {
  WorkerEnv w = derive_worker_env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "0"},
                                   {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_EQ(w.source, "torchrun");
  EXPECT_EQ(w.rank, 1);
}

TEST(WorkerEnv, MalformedValuesNameTheVariable) {
  auto message = [](const EnvMap& env) {
    try {
      derive_worker_env(env);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{"RANK", "x1"}, {"WORLD_SIZE", "2"}}).find("RANK='x1'"), std::string::npos);
  EXPECT_NE(message({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("rank 2 is outside world size 2"), std::string::npos);
  EXPECT_NE(message({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}})
                .find("MASTER_PORT=70000"),
            std::string::npos);
  EXPECT_NE(message({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "two"}}).find("SLURM_NTASKS"), std::string::npos);
  EXPECT_EQ(message({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_NTASKS_PER_NODE", "x(x2)"}}),
            "environment variable SLURM_NTASKS_PER_NODE='x(x2)' is not an integer");
  EXPECT_EQ(message({{"RANK", "\x1b[2J"}, {"WORLD_SIZE", "2"}}), "environment variable RANK='\\x1b[2J' is not an integer");
  EXPECT_EQ(message({{"DTRAIN_PREVIOUS_WORLD_SIZE", "four"}}), "environment variable DTRAIN_PREVIOUS_WORLD_SIZE='four' is not an integer");
  EXPECT_EQ(message({{"DTRAIN_PREVIOUS_WORLD_SIZE", "0"}}), "DTRAIN_PREVIOUS_WORLD_SIZE=0 is not a world size");
  EXPECT_EQ(message({{"DTRAIN_FAILURE_TIME", "noon"}}), "environment variable DTRAIN_FAILURE_TIME='noon' is not a Unix time in seconds");
  EXPECT_EQ(message({{"DTRAIN_FAILURE_TIME", "-3"}}), "environment variable DTRAIN_FAILURE_TIME='-3' is not a Unix time in seconds");
}

TEST(WorkerEnv, ALocalWorldSizeOfZeroIsAnErrorNotADivisionByZero) {
  for (const EnvMap& env : {EnvMap{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "0"}},
                            EnvMap{{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "0"}},
                            EnvMap{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_NTASKS_PER_NODE", "0"}}}) {
    try {
      derive_worker_env(env);
      ADD_FAILURE() << "accepted a local world size of 0";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("outside local world size 0"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace dtrain
