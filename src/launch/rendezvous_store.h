// Where an elastic job's agents meet: the store at --master-addr:--master-port, hosted by whichever
// agent binds the port. Every agent runs the same steps (connect; when nothing answers and the address
// is one of this host's, host the store; else try again), so no agent is special: when the host dies,
// the survivors run them again and one of them takes over (on one machine, or where the address
// floats between hosts). The new store starts empty; the agents bring their round numbers with them.
#pragma once
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "launch/launch_options.h"

namespace dtrain {

struct RendezvousStore {
  c10::intrusive_ptr<c10d::TCPStore> store;
  bool hosting = false;  // this agent's process serves it
};

// Connects to or hosts the store, trying until --rdzv-timeout; throws naming the address and why.
RendezvousStore open_rendezvous_store(const LaunchOptions& options);

}  // namespace dtrain
