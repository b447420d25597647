// How an agent started on another host by the multi-node launcher learns that the launcher is gone.
// The launcher holds the write end of each remote agent's standard input (through ssh, or the remote
// shell): when the launcher ends, however it ends, or the connection drops, the agent reads end of
// file. Reading it turns into SIGHUP, which stops the agent and its workers as any stop signal does.
#pragma once

namespace dtrain {

// Starts a thread that reads and discards standard input and, at its end, sends SIGHUP to this process.
void hang_up_when_stdin_ends();

}  // namespace dtrain
