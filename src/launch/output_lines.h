// Reading a child's output pipe line by line, for the agent (a worker's output) and the multi-node
// launcher (a host's): whatever is available now, without blocking, each complete line handed on.
#pragma once
#include <functional>
#include <string>

namespace dtrain {

// Reads what is available on the non-blocking pipe `fd` and hands every complete line to `emit`,
// keeping an unfinished one in `partial`. At end of file it hands on the unfinished line too, closes
// the pipe and sets `fd` to -1. Returns false once the pipe is closed.
bool pump_lines(int& fd, std::string& partial, const std::function<void(const std::string&)>& emit);

}  // namespace dtrain
