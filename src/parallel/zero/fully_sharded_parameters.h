// ZeRO stage 3 / FSDP's parameters: between uses each rank keeps only its shard of every unit
// (parameter_units.h; BucketShards gives it 1/dp of each unit, padded), and a unit is made whole by
// one all-gather just before its part of the forward pass runs, and freed after. The next part's
// all-gather is launched before this part computes (prefetch), so it overlaps compute. With
// reshard_after_forward a block's unit is freed as soon as its forward ends and gathered again when
// its backward begins (a hook on the block's output gradient), prefetching the block before it; the
// last block, whose backward comes first, and the head unit stay whole until their backward. Without
// it (FSDP's SHARD_GRAD_OP) every unit stays whole from its forward to its backward. A unit is freed
// for good once ReduceScatterGrads has taken its gradients, or earlier when no backward reads it:
// the embeddings' backward reads no parameter values, so their unit goes after their forward, or,
// tied to the head, once the head's backward is over (a hook on the last block's output gradient);
// the embedding's gradient then arrives with no copy of its weight left whole. A tied table larger
// than a unit is instead cut into units of rows (parameter_units.h's RowSplit) that belong to no
// part: the lookup and the head gather them one at a time (sharded_table.h).
//
// A unit kept whole (parallel.modules zero_stage 0; BucketShards) is this rank's piece entire: its
// "gather" is a copy from the shard into the unit's buffer, no collective, and everything else (its
// freeing, working copies, offloading) is any unit's. The shard holds the copy the optimizer updates,
// the same on every rank since its gradients are all-reduced; the buffer, a unit-sized transient.
//
// The module's parameters stay the tensors autograd knows; each is a view into its unit's buffer,
// whose storage is allocated on gather and emptied on free (what autograd saved for backward sees
// the storage refilled by the next gather). Under mixed precision the 16-bit working copies of the
// matmul weights are views into a second buffer per unit. A unit of matmul-only weights
// (parameter_units.h) is gathered straight into it, half the bytes, each rank rounding its own piece:
// its fp32 parameters are never read, so their buffer stays empty. Any other unit with working copies
// (a tied embedding) is gathered in fp32 and rounded into its 16-bit buffer after each gather. With
// 16-bit gathers of every such unit (FSDP's param_dtype) the fp32 buffer is filled from the 16-bit
// one instead, and the unit's other parameters are used rounded. The shard stays fp32 throughout.
//
// With offload_param on NVMe the shard itself lives in an unnamed file (common/unnamed_file.h).
// A gather takes its piece from the file without mapping it in, read with asynchronous I/O one part
// ahead of its gather (io_uring, AsyncFileIo), so the disk works while the part before computes; reads
// left over are dropped when the next pass begins, since the shard changes only between passes. The
// optimizer streams the shard through its buffers when its state is on NVMe too
// (NvmeOptimizer::stream_parameters_from). Every other reader (a checkpoint, the finiteness check,
// the optimizer with its state in memory) sees shard() as the file's shared mapping, into which the
// kernel reads pages as they are touched; they leave this process's memory again with evict_shard(),
// their contents kept by the file.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/collectives.h"
#include "model/forward_part_hooks.h"
#include "optim/flat_parameters.h"
#include "parallel/zero/async_file_io.h"
#include "parallel/zero/bucket_shards.h"

namespace dtrain {

class FullyShardedParameters : public ForwardPartHooks {
 public:
  // `params`: the layout alone (FlatParameters::Buffers::None); `units`: make_unit_buckets of its entries;
  // `parts`: the model's forward parts (TransformerImpl::forward_parts), which say which unit each
  // part uses and which parts are blocks. The parameters move into whole unit buffers and stay whole
  // until reshard(), so that rank 0's can be broadcast.
  FullyShardedParameters(FlatParameters& params, std::vector<GradBucket> units, const std::vector<ForwardPart>& parts,
                         std::shared_ptr<Group> group, bool reshard_after_forward);
  ~FullyShardedParameters();
  FullyShardedParameters(const FullyShardedParameters&) = delete;
  FullyShardedParameters& operator=(const FullyShardedParameters&) = delete;
  // Mixed precision: `working` holds, per matmul weight (a parameter), the slot of its 16-bit working
  // copy in `dtype`, which becomes a view into the unit's 16-bit buffer (call while whole). Units
  // made of `matmul_only` weights are gathered into that buffer; with `gather_16bit`, every unit
  // with one is (see above).
  void keep_working_copies(at::ScalarType dtype, const std::vector<std::pair<at::Tensor, at::Tensor*>>& working,
                           const std::vector<at::Tensor>& matmul_only, bool gather_16bit);

  // Moves the shard into an unnamed file under `dir` (call before anything is in it); throws
  // std::invalid_argument saying what is wrong with `dir`.
  void keep_shard_in_file(const std::string& dir);
  bool shard_in_file() const { return shard_fd_ >= 0; }
  // The shard's file (shard() is its mapping), -1 unless shard_in_file(), and what errors call it.
  int shard_file() const { return shard_fd_; }
  const std::string& shard_file_name() const { return shard_file_name_; }
  // Moves the shard to host memory (offload_param cpu on an accelerator): each gather copies this
  // rank's piece to the device first.
  void keep_shard_on_host();
  // Drops the shard's pages from memory when it lives in a file (its contents stay there).
  void evict_shard() { evict(0, shard_.numel()); }

  const BucketShards& shards() const { return shards_; }
  at::Tensor& shard() { return shard_; }  // this rank's pieces of every unit end to end; the padding stays zero
  const Spans& shard_decay() const { return shard_decay_; }  // where weight decay applies in shard()
  // The unit buffers, for the broadcast at start, while every one is whole in fp32 (later a unit of
  // matmul-only weights is gathered into its 16-bit buffer alone).
  const std::vector<at::Tensor>& unit_buffers() const { return whole_; }

  // Takes this rank's pieces from the whole units (a broadcast may have changed them) and frees them.
  void reshard();
  // Frees every unit without reading it.
  void release_all();

  // Pipeline parallelism runs a step's micro-batches through the stage's parts in its schedule's
  // order, not as passes: every unit is gathered once for the whole step and held, whatever the
  // parts' hooks say, until ReduceScatterGrads takes its gradients after the step's last backward;
  // stop_holding() then gives the hooks their say again (validation's passes).
  void hold_whole();
  void stop_holding() { holding_ = false; }

  void before_part(int part) override;
  void after_part(int part, const at::Tensor& output) override;
  // ReduceScatterGrads has taken `unit`'s gradients: its backward is over.
  void gradients_taken(int unit) { release(unit); }

  // Units of rows of one parameter (parameter_units.h's RowSplit) belong to no part's gathers: the
  // parameter is read by its row blocks (model/row_blocked_table.h), whose reader gathers each one
  // with these. The parameter itself keeps its shape and no storage.
  bool is_row_unit(int unit) const { return row_unit_[size_t(unit)]; }
  void prefetch_unit(int unit) { gather(unit); }
  // The unit's elements, whole until release_unit.
  at::Tensor acquire_unit(int unit);
  void release_unit(int unit) { release(unit); }

  // What the passes since start_trace() did, in order: "begin"/"end" of a part's forward, "backward"
  // when its backward begins, "read" (of its pieces from the shard's file, started ahead), "gather"
  // (launched; "copy" for a unit kept whole), "gathered" (waited for) and "free" of its parameters, each with the part's index and
  // ms since start_trace(). For wall_clock_breakdown and the prefetch tests.
  struct Event {
    std::string what;
    int index;
    double ms;
  };
  void start_trace();
  const std::vector<Event>& trace() const { return trace_; }
  // Bytes of the whole units this rank's gathers filled since start_trace(), its own piece and the
  // padding included (units kept whole, which no collective fills, not).
  int64_t gathered_bytes() const { return gathered_bytes_; }

 private:
  enum class State { Free, Gathering, Whole };
  void gather(int unit);  // launches the all-gather (nothing if the unit is not free)
  void wait(int unit);    // gathers if needed and waits until whole
  void release(int unit);
  void note(const char* what, int part);
  void evict(int64_t offset, int64_t numel);
  // Pieces from the shard's file: the reads of a part's free units started ahead, one started, the
  // piece of a unit taken (read now unless read ahead; throws naming the file), all pending dropped.
  void read_ahead(int part);
  void start_read(int unit);
  at::Tensor take_piece(int unit);
  void drop_reads();
  bool is_block(int part) const { return part >= 0 && part < int(is_block_.size()) && is_block_[size_t(part)]; }
  bool gathers_16bit(int unit) const { return working_[unit].defined() && (gather_16bit_ || matmul_only_[unit]); }

  std::shared_ptr<Group> group_;
  std::vector<FlatEntry> entries_;
  std::vector<GradBucket> units_;
  BucketShards shards_;
  std::vector<bool> is_block_;  // per part index: a transformer block
  int first_part_ = -1;         // the lowest part index: the forward pass begins with it
  int last_part_ = -1;          // the highest part index: the forward pass ends with it
  int last_block_ = -1;         // the highest block's part index: its backward comes first
  bool reshard_after_forward_;
  bool holding_ = false;  // hold_whole(): no part frees its units
  at::Tensor shard_;
  int shard_fd_ = -1;
  std::string shard_file_name_;
  std::unique_ptr<AsyncFileIo> io_;  // with the shard in a file
  struct PieceRead {
    at::Tensor buffer;
    uint64_t ticket = 0;
  };
  std::map<int, PieceRead> reads_;  // per unit, pieces being read ahead of their gathers
  std::vector<at::Tensor> abandoned_;  // buffers of reads that failed to complete: never freed
  Spans shard_decay_;
  std::vector<at::Tensor> whole_;  // per unit: its padded buffer, storage empty while free
  std::vector<at::Tensor> working_;  // per unit: the 16-bit copy of whole_ under mixed precision (else undefined)
  std::vector<bool> matmul_only_;    // per unit: only matmul weights, gathered into working_ (its whole_ stays empty)
  bool gather_16bit_ = false;        // every unit with a working_ buffer is gathered into it
  std::vector<at::Tensor> sending_;  // per unit, while its gather runs: this rank's piece rounded or moved to the device
  std::vector<State> state_;
  std::vector<bool> row_unit_;  // per unit: rows of a parameter cut by rows
  std::vector<CommHandle> gathering_;
  std::vector<std::vector<int>> units_of_part_;  // per part: the units its forward reads, its own and those it borrows
  std::vector<int> part_of_unit_;                // the part that owns each unit
  std::vector<int> read_last_by_;                // per unit: the last part whose forward reads it
  std::vector<bool> backward_reads_values_;      // per part: false for the embeddings (lookups and an add)
  std::vector<std::vector<int>> freed_after_backward_of_;  // per part: borrowed units no backward reads after its own
  std::vector<Event> trace_;
  bool tracing_ = false;  // start_trace() was called: note() records
  double trace_start_ = 0;
  int64_t gathered_bytes_ = 0;
};

}  // namespace dtrain
