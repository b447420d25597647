// Hosting or reaching a c10d TCPStore, with a failure that reads as one line. c10d logs every failed
// attempt to connect with the whole C++ backtrace of the error it then throws: a node 0 that is not
// up yet fills the console with stack frames before the one message that matters. Those logs are
// silenced while the store is opened; the caller says what it waited for and where.
#pragma once
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <string>

namespace dtrain {

// Throws std::runtime_error carrying c10d's reason without its backtrace.
c10::intrusive_ptr<c10d::TCPStore> open_tcp_store(const std::string& host, const c10d::TCPStoreOptions& options);

}  // namespace dtrain
