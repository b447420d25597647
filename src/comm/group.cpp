#include "comm/group.h"

#include <algorithm>
#include <stdexcept>

namespace dtrain {

Group::Group(std::string name, std::vector<int> ranks, int global_rank, c10::intrusive_ptr<c10d::Backend> backend,
             std::chrono::milliseconds timeout, std::shared_ptr<CollectiveLog> log,
             std::shared_ptr<HangDiagnosis> diagnosis)
    : name_(std::move(name)),
      ranks_(std::move(ranks)),
      backend_(std::move(backend)),
      timeout_(timeout),
      log_(std::move(log)),
      diagnosis_(std::move(diagnosis)) {
  auto it = std::find(ranks_.begin(), ranks_.end(), global_rank);
  if (it == ranks_.end())
    throw std::invalid_argument("rank " + std::to_string(global_rank) + " is not a member of group " + name_);
  rank_ = static_cast<int>(it - ranks_.begin());
  key_ = name_ + ":" + format_ranks(ranks_);
  log_->add_group(key_, name_, ranks_);
}

}  // namespace dtrain
