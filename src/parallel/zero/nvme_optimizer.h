// ZeRO-Infinity's optimizer offload to NVMe (zero_optimization.offload_optimizer.device "nvme"): the
// optimizer state of this rank's shard lives in files under nvme_path, not in memory. A step streams
// it through a few buffers of zero_optimization.sub_group_size elements: while the rule (AdamW, SGD)
// updates one sub-group, the next is being read and the one before written back, so the disk works
// while the CPU computes (AsyncFileIo). Resident memory for the state drops from its whole size to
// those buffers.
// The files are unnamed (common/unnamed_file.h): nothing is ever left in nvme_path.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "optim/flat_optimizer.h"
#include "parallel/zero/async_file_io.h"
#include "parallel/zero/nvme_sub_groups.h"

namespace dtrain {

struct NvmeOffloadOptions {
  std::string path;              // nvme_path: an existing, writable directory
  int64_t sub_group_size = 1000000000;  // elements updated per buffer (DeepSpeed's default)
};

class NvmeOptimizer : public ElementwiseOptimizer {
 public:
  // State for `numel` elements of `options`' dtype; throws naming the path when it is missing, not a
  // directory, or not writable.
  NvmeOptimizer(std::unique_ptr<ElementwiseRule> rule, int64_t numel, at::TensorOptions options, NvmeOffloadOptions offload);
  ~NvmeOptimizer() override;

  // ZeRO-3 with its parameter shard on NVMe too (FullyShardedParameters::shard_file()): the
  // parameters of state element i are the fp32 value at byte 4·i of `fd` (duplicated), and a step
  // streams them through the buffers with the state instead of touching the pieces' params, so the
  // shard never becomes resident. The pieces' params must be that file's mapping.
  void stream_parameters_from(int fd, const std::string& name);
  void step_pieces(const std::vector<StatePiece>& pieces, double lr, const GradUse& use) override;
  // The files' shared mappings: a checkpoint reads (a resume writes) the state through the page
  // cache, which the kernel can reclaim, not through memory of this process's own. Live, like state
  // kept in memory: a later step changes what they hold.
  std::map<std::string, at::Tensor> state() const override;
  std::vector<StateEntry> state_entries() const override;
  // Copies into the files what is not already there: state()'s own mappings, filled in place (a
  // resume), are skipped.
  void load_state(const std::map<std::string, at::Tensor>& state) override;
  double base_lr() const override { return rule_->base_lr(); }
  // The streaming buffers and the rule's scratch: what stays in memory.
  int64_t resident_bytes() const override;
  // Bytes of state in the files.
  int64_t offloaded_bytes() const { return numel_ * int64_t(names_.size()) * int64_t(options_.dtype().itemsize()); }
  // Bytes a step streams through the buffers: the state, and the parameters when streamed.
  int64_t streamed_bytes() const { return numel_ * int64_t(streamed_files()) * int64_t(options_.dtype().itemsize()); }
  const std::string& io_mode() const { return io_->mode(); }

 private:
  // Starts moving sub-group `group` of every streamed file into (out of) buffer set `set`.
  std::vector<uint64_t> transfer(bool write, int64_t group, int set) const;
  at::Tensor map_state(size_t i) const;  // state tensor i's file, mapped shared
  bool is_state_mapping(size_t i, const at::Tensor& t) const;  // t is state()'s mapping of file i, still alive
  int64_t group_begin(int64_t group) const { return group * sub_group_; }
  int64_t group_numel(int64_t group) const { return std::min(sub_group_, numel_ - group_begin(group)); }
  // What errors call file i (they have no names of their own).
  std::string file_name(size_t i) const { return i < names_.size() ? "optimizer state '" + names_[i] + "' in " + path_ : params_name_; }
  // The files a step streams: the state's, then the parameters' when streamed.
  size_t streamed_files() const { return files_.size() + (params_fd_ >= 0 ? 1 : 0); }
  int file(size_t i) const { return i < files_.size() ? files_[i] : params_fd_; }

  std::unique_ptr<ElementwiseRule> rule_;
  std::vector<std::string> names_;  // rule_->state_names()
  int64_t numel_, sub_group_, groups_;
  at::TensorOptions options_;
  std::string path_;
  std::vector<int> files_;                       // per state name, unnamed
  int params_fd_ = -1;                           // stream_parameters_from()
  std::string params_name_;
  std::vector<std::vector<at::Tensor>> buffers_;  // per buffer set, per streamed file: sub_group_ elements
  std::unique_ptr<AsyncFileIo> io_;
  int64_t steps_ = 0;
  mutable std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>> handed_out_;  // per state file: state()'s last mapping
};

}  // namespace dtrain
