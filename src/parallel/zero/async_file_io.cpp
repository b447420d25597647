#include "parallel/zero/async_file_io.h"

#include <liburing.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "common/positioned_io.h"

namespace dtrain {

AsyncFileIo::AsyncFileIo(unsigned queue_depth) : queue_depth_(queue_depth) {
  if (const char* env = std::getenv("DTRAIN_IO_URING"); env && std::string(env) == "0") {
    mode_ = "synchronous pread/pwrite (DTRAIN_IO_URING=0)";
    return;
  }
  ring_ = new io_uring;
  if (const int e = io_uring_queue_init(queue_depth, ring_, 0); e < 0) {
    delete ring_;
    ring_ = nullptr;
    mode_ = std::string("synchronous pread/pwrite (io_uring unavailable: ") + std::strerror(-e) + ")";
    return;
  }
  mode_ = "io_uring";
}

AsyncFileIo::~AsyncFileIo() {
  if (!ring_) return;
  // The kernel may still be writing into buffers the caller is about to free.
  try {
    while (in_flight_ > 0) reap_one();
  } catch (const std::exception&) {
    return;  // the ring cannot be drained: leaving it mapped is safer than freeing what the kernel may still use
  }
  io_uring_queue_exit(ring_);
  delete ring_;
}

uint64_t AsyncFileIo::read(int fd, const std::string& name, void* buffer, size_t bytes, off_t offset) {
  return submit({false, fd, name, static_cast<char*>(buffer), bytes, 0, offset});
}

uint64_t AsyncFileIo::write(int fd, const std::string& name, const void* buffer, size_t bytes, off_t offset) {
  return submit({true, fd, name, static_cast<char*>(const_cast<void*>(buffer)), bytes, 0, offset});
}

uint64_t AsyncFileIo::submit(Request request) {
  const uint64_t ticket = next_ticket_++;
  Request& r = requests_.emplace(ticket, std::move(request)).first->second;
  if (r.bytes == 0) r.finished = true;
  else if (!ring_) finish_synchronously(r);
  else enqueue(ticket);
  return ticket;
}

// A queued entry counts as in flight from the moment it is in the ring: a submit that fails now
// (the kernel busy) leaves it there, and the next submit, or reap_one()'s, sends it.
void AsyncFileIo::enqueue(uint64_t ticket) {
  while (in_flight_ >= queue_depth_) reap_one();
  Request& r = requests_.at(ticket);
  io_uring_sqe* sqe = io_uring_get_sqe(ring_);  // the ring has room: no more than queue_depth_ entries are in flight
  const size_t len = std::min(r.bytes - r.done, kMaxTransfer);
  if (r.write) io_uring_prep_write(sqe, r.fd, r.buffer + r.done, unsigned(len), uint64_t(r.offset) + r.done);
  else io_uring_prep_read(sqe, r.fd, r.buffer + r.done, unsigned(len), uint64_t(r.offset) + r.done);
  io_uring_sqe_set_data(sqe, reinterpret_cast<void*>(uintptr_t(ticket)));
  ++in_flight_;
  const int e = io_uring_submit(ring_);
  if (e < 0 && e != -EAGAIN && e != -EBUSY && e != -EINTR)
    throw std::runtime_error(std::string("io_uring: submitting a request for '") + r.name + "' failed: " + std::strerror(-e));
}

void AsyncFileIo::reap_one() {
  io_uring_cqe* cqe = nullptr;
  int e;
  // Sends what is queued and waits for a completion; EBUSY says completions are waiting to be taken.
  while ((e = io_uring_submit_and_wait(ring_, 1)) == -EINTR || e == -EAGAIN) {
  }
  if (e >= 0 || e == -EBUSY) {
    while ((e = io_uring_wait_cqe(ring_, &cqe)) == -EINTR) {
    }
  }
  if (e < 0) throw std::runtime_error(std::string("io_uring: waiting for a completion failed: ") + std::strerror(-e));
  const uint64_t ticket = uint64_t(reinterpret_cast<uintptr_t>(io_uring_cqe_get_data(cqe)));
  const int res = cqe->res;
  io_uring_cqe_seen(ring_, cqe);
  --in_flight_;
  auto it = requests_.find(ticket);
  if (it == requests_.end()) return;  // a request whose waiter gave up on an earlier error
  Request& r = it->second;
  if (res < 0 || res == 0) {  // nothing moved: an error, or a read past the end of the file
    r.error = res < 0 ? -res : EIO;
    r.finished = true;
    return;
  }
  r.done += size_t(res);
  if (r.done < r.bytes) enqueue(ticket);  // a short transfer: the rest goes again
  else r.finished = true;
}

void AsyncFileIo::finish_synchronously(Request& r) {
  r.done += transfer_all(r.write, r.fd, r.buffer + r.done, r.bytes - r.done, r.offset + off_t(r.done));
  if (r.done < r.bytes) r.error = errno ? errno : EIO;  // errno 0: a read past the end of the file
  r.finished = true;
}

void AsyncFileIo::check(uint64_t ticket) {
  const Request r = requests_.at(ticket);
  requests_.erase(ticket);
  if (r.error)
    throw std::runtime_error("cannot " + std::string(r.write ? "write " : "read ") + std::to_string(r.bytes) + " bytes at offset " +
                             std::to_string(r.offset) + " of '" + r.name + "': " + std::strerror(r.error));
}

void AsyncFileIo::wait(uint64_t ticket) {
  while (!requests_.at(ticket).finished) reap_one();
  check(ticket);
}

void AsyncFileIo::wait_all() {
  while (!requests_.empty()) wait(requests_.begin()->first);
}

}  // namespace dtrain
