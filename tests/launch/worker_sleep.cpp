// A worker that only waits: `worker_sleep SECONDS [MARKER]`. The marker in its command line lets a
// test find out whether any such worker is still alive.
#include <chrono>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  std::this_thread::sleep_for(std::chrono::duration<double>(argc > 1 ? std::stod(argv[1]) : 30.0));
  return 0;
}
