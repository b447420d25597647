#include "launch/tcp_store.h"

#include <c10/util/Logging.h>

#include <stdexcept>

namespace dtrain {

c10::intrusive_ptr<c10d::TCPStore> open_tcp_store(const std::string& host, const c10d::TCPStoreOptions& options) {
  // c10's log threshold is one process-wide setting, read as each message is logged: raised to
  // fatal for the store's construction only, which logs nothing else worth keeping.
  struct QuietLogs {
    int saved = FLAGS_caffe2_log_level;
    QuietLogs() { FLAGS_caffe2_log_level = c10::GLOG_FATAL; }
    ~QuietLogs() { FLAGS_caffe2_log_level = saved; }
  } quiet;
  try {
    return c10::make_intrusive<c10d::TCPStore>(host, options);
  } catch (const c10::Error& e) {
    std::string reason = e.what_without_backtrace();
    reason = reason.substr(0, reason.find('\n'));
    if (!reason.empty() && reason.back() == '.') reason.pop_back();  // callers go on after it
    throw std::runtime_error(reason);
  }
}

}  // namespace dtrain
