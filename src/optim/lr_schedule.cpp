#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/printable.h"
#include "common/printable_json.h"
#include "optim/section_params.h"

namespace dtrain {

namespace {

// DeepSpeed's warmup gamma: log(step+1)/log(warmup) or step/warmup, 1 after warmup.
std::function<double(int64_t)> deepspeed_warmup(int64_t warmup, const std::string& type) {
  if (type != "log" && type != "linear")
    throw std::invalid_argument("scheduler.params.warmup_type must be \"log\" or \"linear\", got \"" + printable(type) + "\"");
  const double inv_log = 1.0 / std::log(double(std::max<int64_t>(warmup, 2)));
  return [=](int64_t step) {
    if (step >= warmup) return 1.0;
    return type == "log" ? inv_log * std::log(double(step + 1)) : double(step) / double(warmup);
  };
}

void check_total_covers_warmup(const nlohmann::json& params, int64_t total, int64_t warmup) {
  if (total >= warmup) return;
  const std::string source = params.contains("total_num_steps") ? "" : ", taken from train.steps";
  throw std::invalid_argument("scheduler.params.total_num_steps (" + std::to_string(total) + source +
                              ") must be at least scheduler.params.warmup_num_steps (" + std::to_string(warmup) + ")");
}

double linear_warmup(int64_t step, int64_t warmup) { return double(step + 1) / double(warmup + 1); }

// DeepSpeed's marker of where a resumed schedule stands (-1: not resumed). dtrain's schedules follow
// the step a run resumes at, so it is checked and not used.
void check_last_batch_iteration(const SectionParams& p) {
  const double v = p.number("last_batch_iteration", -1, -1, 0x1p53);
  if (v != std::floor(v))
    throw std::invalid_argument(p.name("last_batch_iteration") + " must be a whole number, got " + printable_json(p.raw("last_batch_iteration")));
}

}  // namespace

std::optional<std::set<std::string>> schedule_param_names(const std::string& type) {
  if (type == "constant" || type == "linear" || type == "cosine" || type == "wsd")
    return std::set<std::string>{"warmup_steps", "min_ratio", "decay_steps", "decay_fraction"};
  if (type == "WarmupLR" || type == "WarmupDecayLR")
    return std::set<std::string>{"warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type", "total_num_steps", "last_batch_iteration"};
  if (type == "WarmupCosineLR")
    return std::set<std::string>{"total_num_steps", "warmup_min_ratio", "warmup_num_steps", "cos_min_ratio", "warmup_type", "last_batch_iteration"};
  return std::nullopt;
}

LrSchedule::LrSchedule(const nlohmann::json& spec, double base_lr, int64_t total_steps) {
  type_ = spec.value("type", "constant");
  const nlohmann::json params = spec.value("params", nlohmann::json::object());
  const double lr0 = base_lr;
  const auto known = schedule_param_names(type_);
  if (!known)
    throw std::invalid_argument("scheduler.type \"" + printable(type_) +
                                "\" is unknown (known: constant, linear, cosine, wsd, WarmupLR, WarmupDecayLR, WarmupCosineLR)");
  const SectionParams p("scheduler", params, *known);
  if (type_ == "constant" || type_ == "linear" || type_ == "cosine" || type_ == "wsd") {
    const int64_t warmup = p.steps("warmup_steps", 0);
    warmup_ = warmup;
    warmup_key_ = "scheduler.params.warmup_steps";
    const double min_ratio = p.number("min_ratio", 0.0);
    if (min_ratio < 0 || min_ratio > 1) throw std::invalid_argument("scheduler.params.min_ratio must be in [0, 1]");
    const int64_t total = std::max<int64_t>(total_steps, warmup + 1);
    std::function<double(int64_t)> after;  // ratio as a function of progress after warmup
    if (type_ == "constant") {
      after = [](int64_t) { return 1.0; };
    } else if (type_ == "linear" || type_ == "cosine") {
      const bool cosine = type_ == "cosine";
      after = [=](int64_t step) {
        const double progress = std::min(1.0, double(step - warmup) / double(std::max<int64_t>(1, total - 1 - warmup)));
        const double shape = cosine ? 0.5 * (1 + std::cos(M_PI * progress)) : 1 - progress;
        return min_ratio + (1 - min_ratio) * shape;
      };
    } else {
      const double fraction = p.number("decay_fraction", 0.1, 0, 1);
      const int64_t decay = p.steps("decay_steps", int64_t(std::round(fraction * total)));
      const int64_t decay_start = total - std::max<int64_t>(decay, 1);
      if (decay_start < warmup)
        throw std::invalid_argument("scheduler.params: warmup_steps + decay steps exceed train.steps (" + std::to_string(total_steps) + ")");
      after = [=](int64_t step) {
        if (step < decay_start) return 1.0;
        const double progress = std::min(1.0, double(step - decay_start + 1) / double(total - decay_start));
        return min_ratio + (1 - min_ratio) * (1 - progress);
      };
    }
    fn_ = [=](int64_t step) { return lr0 * (step < warmup ? linear_warmup(step, warmup) : after(step)); };
  } else if (type_ == "WarmupLR" || type_ == "WarmupDecayLR") {
    check_last_batch_iteration(p);
    const double min_lr = p.number("warmup_min_lr", 0.0), max_lr = p.number("warmup_max_lr", lr0);
    const int64_t warmup = std::max<int64_t>(p.steps("warmup_num_steps", 1000), 1);
    warmup_ = warmup;
    warmup_key_ = "scheduler.params.warmup_num_steps";
    auto gamma = deepspeed_warmup(warmup, p.text("warmup_type", "log"));
    if (type_ == "WarmupLR") {
      fn_ = [=](int64_t step) { return min_lr + (max_lr - min_lr) * gamma(step); };
    } else {
      const int64_t total = p.steps("total_num_steps", total_steps);
      check_total_covers_warmup(params, total, warmup);
      fn_ = [=](int64_t step) {
        const double g = step < warmup ? gamma(step)
                                       : std::max(0.0, double(total - step) / double(std::max<int64_t>(1, total - warmup)));
        return min_lr + (max_lr - min_lr) * g;
      };
    }
  } else {  // WarmupCosineLR
    check_last_batch_iteration(p);
    const int64_t total = p.steps("total_num_steps", total_steps);
    const int64_t warmup = std::max<int64_t>(p.steps("warmup_num_steps", 1000), 1);
    warmup_ = warmup;
    warmup_key_ = "scheduler.params.warmup_num_steps";
    const double warmup_min = p.number("warmup_min_ratio", 0.0), cos_min = p.number("cos_min_ratio", 0.0001);
    check_total_covers_warmup(params, total, warmup);
    auto gamma = deepspeed_warmup(warmup, p.text("warmup_type", "log"));
    fn_ = [=](int64_t step) {
      if (step < warmup) return lr0 * (warmup_min + (1 - warmup_min) * gamma(step));
      const double progress = double(step - warmup + 1) / double(std::max<int64_t>(1, total - warmup));
      return lr0 * std::max(0.0, cos_min + (1 - cos_min) * 0.5 * (1 + std::cos(M_PI * progress)));
    };
  }
}

}  // namespace dtrain
