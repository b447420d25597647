// A worker that only waits: `worker_sleep SECONDS [MARKER]`. The marker in its command line lets a
// test find out whether any such worker is still alive. With WORKER_READY_DIR set, it first creates
// the file $WORKER_READY_DIR/$RANK, so a test can wait until every worker runs.
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  if (const char* dir = std::getenv("WORKER_READY_DIR")) {
    const char* rank = std::getenv("RANK");
    std::ofstream(std::string(dir) + "/" + (rank ? rank : "0"));
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(argc > 1 ? std::stod(argv[1]) : 30.0));
  return 0;
}
