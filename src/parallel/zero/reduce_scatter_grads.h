// ZeRO stage 2's gradient path: each rank keeps only its shard of the averaged gradient
// (BucketShards: 1/dp of every bucket). The parameters have no whole gradient buffer: autograd
// gives each parameter its gradient, and once a bucket's gradients are all there they are copied
// into one padded send buffer and released, and the bucket's reduce-scatter starts while backward
// goes on; the send buffer goes as soon as that finishes. Before a bucket is copied, backward waits
// until at most one other bucket's reduction is in flight (DeepSpeed's two reduction buffers under
// overlap_comm), or none before a bucket that goes in rounds (below): where communication is
// slower than backward, send buffers would otherwise pile up (GPT-2 124M at dp 4 on two cores held
// five or six). So a rank holds its 1/dp shard, the gradients of the bucket filling and at most
// two send buffers, never the whole gradient.
//
// A bucket of more than twice reduce_bucket_size (one large parameter at stage 2; ZeRO-3's unit of
// the embeddings, GPT-2's 147 MiB token table) is reduced in rounds of at most reduce_bucket_size,
// two in flight: round j sends the j-th slice of every rank's piece, so its result lands in the
// same place of the shard as one whole reduce-scatter's would (the layout, and so checkpoints, do
// not change), and no send buffer is the size of the embedding. The gradients stay until the last
// round has copied them. Backward waits for a round before starting the one two after it: only a
// bucket that large pays for it, and the embeddings' comes last.
//
// A bucket kept whole (parallel.modules zero_stage 0; BucketShards) is all-reduced instead, in one
// round: the average lands whole in this rank's shard, where its piece is the whole bucket.
//
// With gradient accumulation every micro-batch is reduced (as DeepSpeed does at stage 2): keeping
// whole gradients between micro-batches would give back the memory stage 2 saves. The shard sums
// the micro-batches in the gradients' own type; data_types.grad_accum_dtype only sets the type on
// the wire.
#pragma once
#include <atomic>
#include <functional>
#include <optional>

#include "parallel/ddp/bucketed_grad_sync.h"
#include "parallel/ddp/data_parallel.h"
#include "parallel/zero/bucket_shards.h"

namespace dtrain {

class ReduceScatterGrads : public BucketedGradSync {
 public:
  // `params` built without a gradient buffer; buckets of options.bucket_bytes, or `units` (ZeRO-3's).
  ReduceScatterGrads(FlatParameters& params, std::shared_ptr<Group> group, DataParallelOptions options,
                     std::vector<GradBucket> units = {});
  // Hybrid sharding: `group` is one shard group, and these ranks, holding the same shard in the
  // other groups (the mesh's dp_replicate), average it once the step's last backward is reduced. A
  // group of one, without hybrid sharding, has nothing to average.
  void average_across(std::shared_ptr<Group> replicas) { replicas_ = std::move(replicas); }
  // Called with a bucket's index once its gradients are in the send buffer (ZeRO-3 frees the unit).
  void on_gradients_taken(std::function<void(int)> callback) { gradients_taken_ = std::move(callback); }

  // A parameter cut into buckets of rows (ZeRO-3's token table read by row blocks: entry `entry`,
  // rows of `row_numel` elements, buckets `buckets`): each block's gradient is handed over with
  // feed() and reduce-scattered at once, and the lookup's rows with feed_rows(), gathered from every
  // rank and added to the shard's rows once the backward's reductions are done.
  void feed_by_rows(const std::vector<int>& buckets, int entry, int64_t row_numel);
  void feed(int bucket, at::Tensor grad);
  void feed_rows(const at::Tensor& rows, const at::Tensor& grads);

  bool reduces_every_micro_batch() const override { return true; }
  // The most elements one send buffer held since construction (what the rounds bound), and the most
  // the send buffers alive at once held (what waiting for all but one bucket's reduction bounds).
  int64_t largest_send_numel() const { return largest_send_numel_; }
  int64_t most_send_numel_in_flight() const { return most_send_numel_in_flight_; }
  void zero_grad() override;
  at::Tensor& grads() override { return shard_grad_; }
  Group* shard_group() override { return group_.get(); }

 private:
  CommHandle reduce(int bucket) override;
  void reduced(int bucket) override;
  void every_bucket_reduced() override;

  // One reduce-scatter of a bucket: `numel` elements of each rank's piece from `from`. Alive while it
  // runs: what was sent, and where the result lands when it cannot land in shard_grad_ directly (a
  // later micro-batch, or a 16-bit wire type).
  struct Round {
    int64_t from = 0, numel = 0;
    CommHandle handle;
    at::Tensor send, received;
  };
  // Copies elements [from, from + numel) of `bucket` (relative to its start) from the gradients into
  // `into`, zeros past the bucket's end (the padding) and where a parameter took no part in backward.
  void copy_gradients(int bucket, int64_t from, int64_t numel, at::Tensor into) const;
  Round launch_round(int bucket, int64_t from, int64_t numel, int rounds);
  // Waits for a round and moves its result into the shard.
  void finish_round(int bucket, Round& round);

  // The lookup's rows of this backward, added to the shard: gathered from every rank, averaged.
  void add_fed_rows();

  BucketShards shards_;
  std::vector<at::Tensor> fed_grads_;  // per bucket: the gradient feed() handed over, until copied
  std::vector<int> row_buckets_;       // feed_by_rows
  int row_entry_ = -1;
  int64_t row_numel_ = 0;
  std::vector<at::Tensor> fed_rows_, fed_row_grads_;  // feed_rows() since the last reduction
  std::optional<at::ScalarType> wire_dtype_;
  int64_t round_numel_;  // reduce_bucket_size in elements: above twice this a bucket goes in rounds
  at::Tensor shard_grad_;  // this rank's pieces end to end; the padding stays zero
  std::vector<std::vector<Round>> rounds_;  // per bucket, those in flight
  int64_t largest_send_numel_ = 0;
  std::atomic<int64_t> send_numel_in_flight_{0};  // the watcher thread gives back what the owner's launched
  int64_t most_send_numel_in_flight_ = 0;
  bool accumulate_ = false;  // shard_grad_ holds an earlier micro-batch of this step
  std::function<void(int)> gradients_taken_;
  std::shared_ptr<Group> replicas_;
};

}  // namespace dtrain
