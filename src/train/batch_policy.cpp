#include "train/batch_policy.h"

#include "common/number_text.h"

namespace dtrain {

namespace {

int64_t saved_batch(const nlohmann::json& saved) { return saved.value("train_batch_size", int64_t(0)); }

// The multiple of `unit` nearest to `batch`. A tie goes to the larger: with the learning rate kept,
// the larger batch's rate is off by the smaller ratio from the linear rule's, and on the side that
// does not risk divergence.
int64_t nearest_multiple(int64_t batch, int64_t unit) {
  const int64_t below = batch / unit * unit, above = below + unit;
  if (below == 0) return above;
  return batch - below < above - batch ? below : above;
}

void set_accumulation(TrainConfig& c, int64_t batch) {
  const int64_t accumulation = batch / (c.micro_batch * c.dp);
  c.global_batch = batch;
  c.accumulation = accumulation;
  c.json["train_batch_size"] = batch;
  c.json["gradient_accumulation_steps"] = accumulation;
  c.json["parallel"]["micro_batches"] = accumulation;
}

std::string divisors(int64_t n) {
  std::string list;
  for (int64_t d = 1; d <= std::min<int64_t>(n, 1024); ++d)
    if (n % d == 0) list += (list.empty() ? "" : ", ") + std::to_string(d);
  return list;
}

ConfigError cannot_make(const TrainConfig& c, const std::string& was, int64_t batch) {
  std::string micro;
  for (int64_t m = 1; batch % c.dp == 0 && m <= batch / c.dp; ++m)
    if ((batch / c.dp) % m == 0) micro += (micro.empty() ? "" : ", ") + std::to_string(m);
  return ConfigError("elastic.batch_policy=fail: " + was + ", which " + std::to_string(c.dp) +
                     " data-parallel rank(s) with train_micro_batch_size_per_gpu " + std::to_string(c.micro_batch) + " cannot make (" +
                     std::to_string(batch) + " is not a multiple of " + std::to_string(c.micro_batch * c.dp) + "): " +
                     (micro.empty() ? "run on a number of data-parallel ranks that divides it (" + divisors(batch) + ")"
                                    : "set train_micro_batch_size_per_gpu to one of " + micro) +
                     ", set elastic.batch_policy=keep to take the nearest batch these ranks can make, or set train_batch_size=" +
                     std::to_string(c.global_batch) + " to go on with a global batch of " + std::to_string(c.global_batch));
}

}  // namespace

void resume_global_batch(TrainConfig& c, const std::string& dir, const nlohmann::json& saved, RankLog& log) {
  const int64_t batch = saved_batch(saved);
  if (batch <= 0 || batch == c.global_batch) return;
  const std::string was = "the checkpoint " + dir + " was trained with a global batch of " + std::to_string(batch);
  if (c.global_batch_given) {
    log.warn(was + "; this run trains with " + std::to_string(c.global_batch) + ", as train_batch_size says");
    return;
  }
  if (c.batch_policy == "scale_lr") {
    log.info(was + "; this run trains with " + std::to_string(c.global_batch) + " (micro-batch " + std::to_string(c.micro_batch) +
             " x accumulation " + std::to_string(c.accumulation) + " x " + std::to_string(c.dp) +
             " data-parallel rank(s), elastic.batch_policy=scale_lr) and scales the learning rate linearly by " +
             std::to_string(c.global_batch) + "/" + std::to_string(batch) + " = " + fixed(batch_lr_factor(c, saved), 4));
    return;
  }
  const int64_t unit = c.micro_batch * c.dp;
  const std::string config_alone = " (the config alone gives " + std::to_string(c.global_batch) + " = accumulation " +
                                   std::to_string(c.accumulation) + "); set train_batch_size to change it";
  if (batch % unit == 0) {
    set_accumulation(c, batch);
    log.info(was + ": kept on " + std::to_string(c.dp) + " data-parallel rank(s) as micro-batch " + std::to_string(c.micro_batch) +
             " x accumulation " + std::to_string(c.accumulation) + config_alone);
    return;
  }
  if (c.batch_policy == "fail") throw cannot_make(c, was, batch);
  set_accumulation(c, nearest_multiple(batch, unit));
  log.info(was + ", which " + std::to_string(c.dp) + " data-parallel rank(s) with micro-batch " + std::to_string(c.micro_batch) +
           " cannot make: this run trains with the nearest global batch they can, " + std::to_string(c.global_batch) +
           " (accumulation " + std::to_string(c.accumulation) + "), at the same learning rate (elastic.batch_policy=keep)" + config_alone);
}

double batch_lr_factor(const TrainConfig& c, const nlohmann::json& saved) {
  const int64_t batch = saved_batch(saved);
  if (c.batch_policy != "scale_lr" || c.global_batch_given || batch <= 0) return 1;
  return double(c.global_batch) / double(batch);
}

}  // namespace dtrain
