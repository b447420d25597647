// ZeRO stages 1 and 2 after the optimizer step: every rank's updated pieces go back to every rank,
// one all-gather per bucket (BucketShards: each rank owns 1/dp of every bucket). They are launched at
// once, in the order the next forward pass reads them — the flat buffer runs in backward's order, so
// the last bucket, the embeddings', first — and each is waited for just before the first forward
// part that reads it (model/forward_part_hooks.h). So the gathers overlap the next forward pass
// instead of ending the step. Whatever reads the parameters outside a forward pass (a checkpoint,
// the 16-bit working copies, a check) calls finish() first. A bucket kept whole (BucketShards) needs
// no gather: every rank updated all of it.
#pragma once
#include <memory>
#include <vector>

#include "comm/collectives.h"
#include "model/forward_part_hooks.h"
#include "optim/flat_parameters.h"
#include "parallel/zero/bucket_shards.h"
#include "parallel/zero/parameter_units.h"

namespace dtrain {

class ParameterAllGather : public ForwardPartHooks {
 public:
  // `entries` and `parts` say which forward part reads each bucket.
  ParameterAllGather(BucketShards shards, std::shared_ptr<Group> group, const std::vector<FlatEntry>& entries,
                     const ParameterParts& parts);
  // Waits for what is still running into the buffers (every rank ends the same way).
  ~ParameterAllGather() override;

  // Starts the all-gathers of `params` (the whole flat buffer, this rank's pieces updated); the last
  // ones must be finished, since they write into the pieces the update changed.
  void launch(at::Tensor& params);
  // Every launched all-gather done and its bucket complete.
  void finish();

  void before_part(int part) override;
  void after_part(int part, const at::Tensor&) override {}

  // Per bucket, the forward part before which its gather was last waited for, or -1 when finish()
  // waited for it (wall_clock_breakdown's record, and the overlap test's).
  const std::vector<int>& waited_before_part() const { return waited_before_part_; }

 private:
  // Waits for the gathers in launch order up to and including bucket `bucket`'s.
  void wait_through(int bucket, int part);

  BucketShards shards_;
  std::shared_ptr<Group> group_;
  std::vector<int> first_bucket_of_part_;  // per part: the lowest-numbered bucket holding its parameters (-1: none)
  at::Tensor params_;                      // the buffer being gathered into
  struct Pending {
    int bucket;
    CommHandle handle;
    at::Tensor send, out;  // alive until done; `out` is the padded bucket when it is not the buffer itself
  };
  std::vector<Pending> pending_;  // in launch order: highest bucket first
  std::vector<int> waited_before_part_;
};

}  // namespace dtrain
