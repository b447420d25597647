#include "launch/stdin_hangup.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

namespace dtrain {

void hang_up_when_stdin_ends() {
  std::thread([] {
    char buf[256];
    for (;;) {
      const ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
      if (n > 0 || (n < 0 && errno == EINTR)) continue;
      break;  // end of file, or an error: either way nobody can reach this agent through it any more
    }
    kill(getpid(), SIGHUP);
  }).detach();
}

}  // namespace dtrain
