// Ranks started by OpenMPI's mpirun instead of `dtrain launch`. mpirun names no node: its
// OMPI_COMM_WORLD_NODE_RANK is a process's rank among those of its node, so the world groups its
// ranks into nodes by the host each one runs on.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "support/process.h"

namespace dtrain::test {
namespace {

// mpirun's path on PATH; empty when it is not installed.
std::string find_mpirun() {
  std::istringstream path(std::getenv("PATH") ? std::getenv("PATH") : "");
  for (std::string dir; std::getline(path, dir, ':');)
    if (!dir.empty() && ::access((dir + "/mpirun").c_str(), X_OK) == 0) return dir + "/mpirun";
  return "";
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The repro: under `mpirun -np 2` on one machine, dist.backend auto chose Gloo, because each rank took
// its rank within the node for the node's rank and so looked like a node of its own.
TEST(Mpirun, RanksOnOneHostAreOneNodeAndTalkThroughSharedMemory) {
  const std::string mpirun = find_mpirun();
  if (mpirun.empty()) GTEST_SKIP() << "mpirun is not installed (Debian: apt-get install openmpi-bin)";
  const ProcessResult r =
      run_process({mpirun, "--oversubscribe", "-np", "2", "-x", "MASTER_ADDR=127.0.0.1", "-x", "MASTER_PORT=" + std::to_string(free_port()),
                   std::string(DTRAIN_TEST_BIN_DIR) + "/worker_collectives", "sweep", "60000"},
                  120,
                  // mpirun refuses to run as root unless told twice.
                  {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count(r.output, "PASS sweep"), 2) << r.output;
  EXPECT_EQ(count(r.output, "group world backend shm\n"), 2) << r.output;
  EXPECT_EQ(count(r.output, "group reversed backend shm\n"), 2) << r.output;
  EXPECT_FALSE(contains(r.output, "backend gloo")) << r.output;
}

}  // namespace
}  // namespace dtrain::test
