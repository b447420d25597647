#include "parallel/zero/fully_sharded_parameters.h"

#include <ATen/core/grad_mode.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "parallel/zero/host_offload_optimizer.h"
#include "parallel/zero/parameter_units.h"
#include "common/unnamed_file.h"

namespace dtrain {

namespace {

// A tensor's storage emptied or refilled in place, through the allocator of its device: every view
// of it, and every tensor autograd saved from one, shares the storage object.
void empty_storage(const at::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(s->allocator()->allocate(0));
  s->set_nbytes(0);
}

void fill_storage(const at::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(s->allocator()->allocate(t.nbytes()));
  s->set_nbytes(t.nbytes());
}

// A tensor over `numel` elements of `buffer` from `offset`, shaped `sizes`, with a version counter of its
// own: refilling the buffer after a gather must not look like an in-place change to what autograd saved.
at::Tensor alias(const at::Tensor& buffer, int64_t offset, int64_t numel, at::IntArrayRef sizes) {
  at::Tensor t = at::empty({0}, buffer.options());
  t.set_(buffer.storage(), buffer.storage_offset() + offset, {numel});
  return t.view(sizes);
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

FullyShardedParameters::FullyShardedParameters(FlatParameters& params, std::vector<GradBucket> units,
                                               const std::vector<ForwardPart>& parts, std::shared_ptr<Group> group,
                                               bool reshard_after_forward)
    : group_(std::move(group)),
      entries_(params.entries()),
      units_(std::move(units)),
      shards_(units_, group_->size(), group_->rank()),
      reshard_after_forward_(reshard_after_forward) {
  const ParameterParts part_of(parts);
  is_block_.assign(size_t(part_of.end()), false);
  backward_reads_values_.assign(size_t(part_of.end()), true);
  for (const ForwardPart& part : parts) {
    first_part_ = first_part_ < 0 ? part.index : std::min(first_part_, part.index);
    last_part_ = std::max(last_part_, part.index);
    backward_reads_values_[size_t(part.index)] = part.kind != ForwardPart::Kind::Embeddings;
    if (part.kind != ForwardPart::Kind::Block) continue;
    is_block_[size_t(part.index)] = true;
    last_block_ = std::max(last_block_, part.index);
  }
  const auto& options = params.options();
  shard_ = at::zeros({shards_.shard_numel()}, options);
  units_of_part_.resize(size_t(part_of.end()));
  at::NoGradGuard no_grad;
  for (int u = 0; u < int(units_.size()); ++u) {
    const GradBucket& b = units_[u];
    const ShardPiece& p = shards_.pieces()[u];
    whole_.push_back(at::zeros({p.padded_numel}, options));
    row_unit_.push_back(dtrain::is_row_unit(b, entries_));
    if (row_unit_.back()) {
      const FlatEntry& e = entries_[size_t(b.first_entry)];
      whole_[u].narrow(0, 0, b.numel).copy_(e.param.detach().reshape({-1}).narrow(0, b.offset - e.offset, b.numel));
    }
    for (int i = b.first_entry; i < b.first_entry + b.entries && !row_unit_.back(); ++i) {
      const FlatEntry& e = entries_[i];
      at::Tensor slot = whole_[u].narrow(0, e.offset - b.offset, e.numel);
      slot.copy_(e.param.detach().reshape({-1}));
      e.param.set_data(slot.view(e.param.sizes()));
    }
    for (Span s : spans_within(params.decay_spans(), p.begin, p.local)) shard_decay_.push_back({p.shard_offset + s.offset, s.numel});
    part_of_unit_.push_back(part_of.of(entries_[b.first_entry].name));
    if (!row_unit_.back()) units_of_part_[size_t(part_of_unit_.back())].push_back(u);
  }
  // A parameter cut by rows lives in its units alone: the tensor autograd knows keeps no storage.
  for (int u = 0; u < int(units_.size()); ++u)
    if (row_unit_[size_t(u)]) empty_storage(entries_[size_t(units_[u].first_entry)].param);
  read_last_by_ = part_of_unit_;
  freed_after_backward_of_.resize(units_of_part_.size());
  for (const ForwardPart& part : parts)
    for (const std::string& name : part.borrowed)
      for (int u = 0; u < int(units_.size()); ++u) {
        const GradBucket& b = units_[u];
        if (row_unit_[size_t(u)]) continue;  // gathered by its reader
        const auto first = entries_.begin() + b.first_entry;
        if (std::none_of(first, first + b.entries, [&](const FlatEntry& e) { return e.name == name; })) continue;
        units_of_part_[size_t(part.index)].push_back(u);
        read_last_by_[size_t(u)] = std::max(read_last_by_[size_t(u)], part.index);
        // Its owner's backward reads no values: nothing needs the unit once this part's backward is over.
        if (!backward_reads_values_[size_t(part_of_unit_[u])]) freed_after_backward_of_[size_t(part.index)].push_back(u);
      }
  state_.assign(units_.size(), State::Whole);
  gathering_.resize(units_.size());
  working_.resize(units_.size());
  matmul_only_.assign(units_.size(), false);
  sending_.resize(units_.size());
}

void FullyShardedParameters::keep_working_copies(at::ScalarType dtype, const std::vector<std::pair<at::Tensor, at::Tensor*>>& working,
                                                 const std::vector<at::Tensor>& matmul_only, bool gather_16bit) {
  gather_16bit_ = gather_16bit;
  at::NoGradGuard no_grad;
  for (int u = 0; u < int(units_.size()); ++u) {
    TORCH_CHECK(state_[u] == State::Whole, "FullyShardedParameters::keep_working_copies: unit ", u, " is not whole");
    const GradBucket& b = units_[u];
    if (row_unit_[size_t(u)]) {  // its reader rounds each block as it reads it: no working copy
      const auto it = std::find_if(working.begin(), working.end(), [&](const auto& w) { return w.first.is_same(entries_[b.first_entry].param); });
      if (it != working.end()) *it->second = at::Tensor();
      continue;
    }
    matmul_only_[u] = true;
    for (int i = b.first_entry; i < b.first_entry + b.entries; ++i) {
      const FlatEntry& e = entries_[i];
      const auto it = std::find_if(working.begin(), working.end(), [&](const auto& w) { return w.first.is_same(e.param); });
      const bool sole = is_one_of(e.param, matmul_only);
      TORCH_CHECK(!sole || it != working.end(), "FullyShardedParameters::keep_working_copies: ", e.name, " is matmul-only without a working copy");
      matmul_only_[u] = matmul_only_[u] && sole;
      if (it == working.end()) continue;
      if (!working_[u].defined()) working_[u] = whole_[u].to(dtype);
      *it->second = alias(working_[u], e.offset - b.offset, e.numel, e.param.sizes());
    }
  }
}

void FullyShardedParameters::keep_shard_in_file(const std::string& dir) {
  const size_t bytes = shard_.nbytes();
  const int fd = make_unnamed_file(dir, int64_t(bytes));
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int error = errno;
  if (data == MAP_FAILED) {
    ::close(fd);
    throw std::invalid_argument("'" + dir + "': cannot map the parameter shard's file: " + std::strerror(error));
  }
  shard_ = at::from_blob(data, shard_.sizes(), [bytes](void* p) { ::munmap(p, bytes); }, shard_.options().device(at::kCPU));
  shard_fd_ = fd;
  shard_file_name_ = "the parameter shard's file in " + dir;
  io_ = std::make_unique<AsyncFileIo>();
}

FullyShardedParameters::~FullyShardedParameters() {
  drop_reads();  // the kernel writes into their buffers until they complete
  for (at::Tensor& t : abandoned_) t.unsafeReleaseTensorImpl();  // left to the kernel: never freed
  if (shard_fd_ >= 0) ::close(shard_fd_);  // the mapping, wherever shard_ still lives, keeps the file
}

void FullyShardedParameters::read_ahead(int part) {
  if (!shard_in_file() || part < 0 || part >= int(units_of_part_.size())) return;
  for (int u : units_of_part_[size_t(part)]) {
    if (state_[u] != State::Free || reads_.count(u)) continue;
    start_read(u);
    note("read", part);
  }
}

void FullyShardedParameters::start_read(int unit) {
  const ShardPiece& p = shards_.pieces()[unit];
  PieceRead r;
  r.buffer = at::empty({p.piece}, host_staging_options(shard_.options(), whole_.front().device()));
  r.ticket = io_->read(shard_fd_, shard_file_name_, r.buffer.data_ptr(), r.buffer.nbytes(), off_t(p.shard_offset * shard_.element_size()));
  reads_[unit] = std::move(r);
}

at::Tensor FullyShardedParameters::take_piece(int unit) {
  if (!reads_.count(unit)) start_read(unit);
  io_->wait(reads_.at(unit).ticket);  // on failure the entry stays, and drop_reads() deals with it
  at::Tensor piece = std::move(reads_.at(unit).buffer);
  reads_.erase(unit);
  return piece;
}

void FullyShardedParameters::drop_reads() {
  for (auto& [unit, r] : reads_) {
    try {
      io_->wait(r.ticket);
    } catch (const std::exception&) {
      // Nobody needs the data (a gather of the unit reads it again, and reports), but the kernel
      // may still write into the buffer: it must outlive this object.
      abandoned_.push_back(std::move(r.buffer));
    }
  }
  reads_.clear();
}

void FullyShardedParameters::keep_shard_on_host() {
  // at::empty, not Tensor::to: a copy to the CPU pins its result only when asked not to block.
  at::Tensor host = at::empty(shard_.sizes(), host_staging_options(shard_.options(), shard_.device()));
  host.copy_(shard_);
  shard_ = host;
}

void FullyShardedParameters::evict(int64_t offset, int64_t numel) {
  if (!shard_in_file() || numel <= 0) return;
  // Whole pages around the range: dropping a neighbour's page from a shared file mapping loses
  // nothing, it is only read in again when touched.
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE)), item = shard_.element_size();
  const uintptr_t base = reinterpret_cast<uintptr_t>(shard_.data_ptr());
  const uintptr_t from = (base + uintptr_t(offset) * item) / page * page;
  const uintptr_t to = (base + uintptr_t(offset + numel) * item + page - 1) / page * page;
  ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
}

void FullyShardedParameters::note(const char* what, int part) {
  if (tracing_) trace_.push_back({what, part, now_ms() - trace_start_});
}

void FullyShardedParameters::start_trace() {
  trace_.clear();
  tracing_ = true;
  trace_start_ = now_ms();
  gathered_bytes_ = 0;
}

void FullyShardedParameters::gather(int unit) {
  if (state_[unit] != State::Free) return;
  const ShardPiece& p = shards_.pieces()[unit];
  note(p.whole ? "copy" : "gather", part_of_unit_[unit]);
  if (!matmul_only_[unit]) fill_storage(whole_[unit]);
  at::Tensor& into = gathers_16bit(unit) ? working_[unit] : whole_[unit];
  if (gathers_16bit(unit)) fill_storage(into);
  // The piece sent is read from the shard's file without mapping it in (offload_param nvme), copied
  // from the host to the device the unit lives on (offload_param), and rounded to 16 bits there,
  // wherever it differs from the unit's.
  at::Tensor piece = shard_in_file() ? (sending_[unit] = take_piece(unit)) : shard_.narrow(0, p.shard_offset, p.piece);
  if (piece.device() != into.device()) piece = sending_[unit] = piece.to(into.device(), /*non_blocking=*/true);
  if (piece.scalar_type() != into.scalar_type()) piece = sending_[unit] = piece.to(into.scalar_type());
  state_[unit] = State::Gathering;  // wait() completes it: the working copy, the trace
  if (p.whole) {  // this rank's piece is the whole unit: a copy, no collective
    at::NoGradGuard no_grad;
    into.copy_(piece);
    return;
  }
  gathering_[unit] = all_gather_async(*group_, piece, into, "zero-3:all-gather unit " + std::to_string(unit));
  gathered_bytes_ += int64_t(into.nbytes());
}

void FullyShardedParameters::wait(int unit) {
  gather(unit);
  if (state_[unit] != State::Gathering) return;
  gathering_[unit].wait();
  gathering_[unit] = CommHandle();
  sending_[unit] = at::Tensor();
  if (gathers_16bit(unit)) {
    if (!matmul_only_[unit]) {  // its other parameters are read in fp32, as rounded
      at::NoGradGuard no_grad;
      whole_[unit].copy_(working_[unit]);
    }
  } else if (working_[unit].defined()) {
    fill_storage(working_[unit]);
    at::NoGradGuard no_grad;
    working_[unit].copy_(whole_[unit]);
  }
  state_[unit] = State::Whole;
  note("gathered", part_of_unit_[unit]);
}

at::Tensor FullyShardedParameters::acquire_unit(int unit) {
  wait(unit);
  return whole_[unit].narrow(0, 0, units_[unit].numel);
}

void FullyShardedParameters::release(int unit) {
  if (state_[unit] == State::Free) return;
  wait(unit);  // a collective in flight writes into the storage
  empty_storage(whole_[unit]);
  if (working_[unit].defined()) empty_storage(working_[unit]);
  state_[unit] = State::Free;
  note("free", part_of_unit_[unit]);
}

void FullyShardedParameters::reshard() {
  at::NoGradGuard no_grad;
  for (int u = 0; u < int(units_.size()); ++u) {
    TORCH_CHECK(state_[u] == State::Whole && whole_[u].storage().nbytes() > 0, "FullyShardedParameters::reshard: unit ", u,
                " is not whole in fp32");
    const ShardPiece& p = shards_.pieces()[u];
    shard_.narrow(0, p.shard_offset, p.local).copy_(whole_[u].narrow(0, p.begin - p.bucket_offset, p.local));
    release(u);
  }
  evict_shard();
}

void FullyShardedParameters::release_all() {
  for (int u = 0; u < int(units_.size()); ++u) release(u);
}

void FullyShardedParameters::hold_whole() {
  holding_ = true;
  drop_reads();
  for (int u = 0; u < int(units_.size()); ++u) gather(u);
  for (int u = 0; u < int(units_.size()); ++u) wait(u);
}

void FullyShardedParameters::before_part(int part) {
  // The shard changes only between passes (the optimizer's step, a resume): what was read ahead in
  // the last one may be stale.
  if (part == first_part_) drop_reads();
  note("begin", part);
  for (int u : units_of_part_[size_t(part)]) wait(u);
  if (part + 1 < int(units_of_part_.size()))
    for (int u : units_of_part_[size_t(part + 1)]) gather(u);
  read_ahead(part + 2);
}

void FullyShardedParameters::after_part(int part, const at::Tensor& output) {
  note("end", part);
  if (holding_) return;
  const bool backward_follows = at::GradMode::is_enabled() && output.requires_grad();
  // What no later part reads goes now when nothing reads it again: without backward, or when the
  // part's backward reads no parameter values (an embedding's gradient needs only the tokens).
  if (!backward_follows || !backward_reads_values_[size_t(part)])
    for (int u : units_of_part_[size_t(part)])
      if (read_last_by_[size_t(u)] == part) release(u);
  if (!backward_follows) {
    if (part == last_part_) release_all();
    return;
  }
  // The last block's backward comes first: freeing it would only gather it again.
  const bool reshard = reshard_after_forward_ && is_block(part);
  if (reshard && part < last_block_)
    for (int u : units_of_part_[size_t(part)]) release(u);
  const size_t next = size_t(part + 1);
  const bool frees_borrowed = next < freed_after_backward_of_.size() && !freed_after_backward_of_[next].empty();
  if (!reshard && !frees_borrowed) return;
  // Runs when this part's output gradient is ready: the next part's backward is over.
  output.register_hook([this, part, reshard, next](const at::Tensor&) {
    if (next < freed_after_backward_of_.size())
      for (int u : freed_after_backward_of_[next]) release(u);
    if (!reshard) return;
    note("backward", part);
    for (int u : units_of_part_[size_t(part)]) wait(u);
    if (is_block(part - 1))
      for (int u : units_of_part_[size_t(part - 1)]) gather(u);
    if (is_block(part - 2)) read_ahead(part - 2);
  });
}

}  // namespace dtrain
