#include "launch/output_lines.h"

#include <unistd.h>

namespace dtrain {

bool pump_lines(int& fd, std::string& partial, const std::function<void(const std::string&)>& emit) {
  if (fd < 0) return false;
  char buf[8192];
  bool open = true;
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      partial.append(buf, n);
      continue;
    }
    if (n == 0) open = false;
    break;  // EAGAIN: nothing more for now
  }
  size_t start = 0, nl;
  while ((nl = partial.find('\n', start)) != std::string::npos) {
    emit(partial.substr(start, nl - start));
    start = nl + 1;
  }
  partial.erase(0, start);
  if (!open) {
    if (!partial.empty()) emit(partial);
    partial.clear();
    close(fd);
    fd = -1;
  }
  return open;
}

}  // namespace dtrain
