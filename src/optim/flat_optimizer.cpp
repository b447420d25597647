#include "optim/flat_optimizer.h"

#include <algorithm>
#include <stdexcept>

#include "common/printable.h"
#include "optim/adamw.h"
#include "optim/resident_optimizer.h"
#include "optim/section_params.h"
#include "optim/sgd.h"

namespace dtrain {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), ::tolower);
  return s;
}

}  // namespace

std::vector<FlatOptimizer::StateEntry> FlatOptimizer::state_entries() const {
  std::vector<StateEntry> out;
  for (const auto& [name, t] : state()) out.push_back({name, t.scalar_type(), t.dim() > 0});
  return out;
}

int64_t FlatOptimizer::resident_bytes() const {
  int64_t bytes = 0;
  for (const auto& [name, t] : state()) bytes += int64_t(t.nbytes());
  return bytes;
}

std::optional<std::set<std::string>> optimizer_param_names(const std::string& type) {
  const std::string t = lower(type);
  if (t == "adamw" || t == "adam") return std::set<std::string>{"lr", "betas", "eps", "weight_decay", "adam_w_mode", "torch_adam", "bias_correction"};
  if (t == "sgd") return std::set<std::string>{"lr", "momentum", "dampening", "weight_decay", "nesterov"};
  return std::nullopt;
}

std::unique_ptr<ElementwiseRule> make_elementwise_rule(const nlohmann::json& spec) {
  const std::string type = spec.value("type", "AdamW");
  const nlohmann::json params = spec.value("params", nlohmann::json::object());
  const std::string t = lower(type);
  const auto known = optimizer_param_names(type);
  if (!known) throw std::invalid_argument("optimizer.type \"" + printable(type) + "\" is unknown (known: AdamW, Adam, SGD)");
  const SectionParams r("optimizer", params, *known);
  if (t == "adamw" || t == "adam") {
    AdamWOptions o;
    o.lr = r.number("lr", o.lr, 0);
    o.eps = r.number("eps", o.eps, 0);
    o.weight_decay = r.number("weight_decay", t == "adam" ? 0.0 : o.weight_decay, 0);
    if (r.has("betas")) {
      const auto& b = r.raw("betas");
      if (!b.is_array() || b.size() != 2 || !b[0].is_number() || !b[1].is_number())
        throw std::invalid_argument("optimizer.params.betas must be two numbers, e.g. [0.9, 0.95]");
      o.beta1 = b[0];
      o.beta2 = b[1];
      if (o.beta1 < 0 || o.beta1 >= 1 || o.beta2 < 0 || o.beta2 >= 1)
        throw std::invalid_argument("optimizer.params.betas must lie in [0, 1)");
    }
    if (!r.boolean("adam_w_mode", true))
      throw std::invalid_argument("optimizer.params.adam_w_mode=false (L2-coupled Adam) is not implemented; use AdamW");
    if (!r.boolean("bias_correction", true))
      throw std::invalid_argument("optimizer.params.bias_correction=false is not implemented: dtrain's Adam always corrects the moments' bias");
    r.boolean("torch_adam", false);  // which of DeepSpeed's implementations runs: one here
    return std::make_unique<AdamW>(o);
  }
  SgdOptions o;
  o.lr = r.number("lr", o.lr, 0);
  o.momentum = r.number("momentum", 0, 0);
  o.dampening = r.number("dampening", 0, 0);
  o.weight_decay = r.number("weight_decay", 0, 0);
  o.nesterov = r.boolean("nesterov", false);
  if (o.nesterov && (o.momentum == 0 || o.dampening != 0))
    throw std::invalid_argument("optimizer.params.nesterov needs momentum > 0 and dampening 0");
  return std::make_unique<Sgd>(o);
}

std::unique_ptr<ElementwiseOptimizer> make_flat_optimizer(const nlohmann::json& spec, const at::Tensor& like) {
  return std::make_unique<ResidentOptimizer>(make_elementwise_rule(spec), like);
}

}  // namespace dtrain
