// A worker that only waits: `worker_sleep SECONDS [MARKER]`. The marker in its command line lets a
// test find out whether any such worker is still alive. With WORKER_READY_DIR set, it first writes its
// pid to the file $WORKER_READY_DIR/$RANK (whole or not at all), so a test can wait until every worker
// runs and learn which process it is.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  if (const char* dir = std::getenv("WORKER_READY_DIR")) {
    const char* rank = std::getenv("RANK");
    const std::string file = std::string(dir) + "/" + (rank ? rank : "0");
    std::ofstream(file + ".tmp") << getpid() << "\n";
    std::rename((file + ".tmp").c_str(), file.c_str());
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(argc > 1 ? std::stod(argv[1]) : 30.0));
  return 0;
}
