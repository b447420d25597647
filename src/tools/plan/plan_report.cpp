#include "tools/plan/plan_report.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "common/byte_words.h"
#include "common/number_text.h"

namespace dtrain {

namespace {

std::string left_aligned(const std::string& s, size_t width) { return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' '); }

std::string link_words(const Link& link) {
  return fixed(link.bus_bytes_per_s / 1e9, 2) + " GB/s, " + fixed(link.latency_s * 1e6, 1) + " us per ring step";
}

std::string run_line(const PlannedLayout& best, const PlanContext& context) {
  std::string line = context.run_prefix;
  for (const std::string& set : best.choice.sets()) line += " --set " + set;
  return line;
}

}  // namespace

std::string plan_table(const Plan& plan, const PlanOptions& o, const PlanContext& context, int top) {
  std::ostringstream out;
  out << context.model << "\n";
  out << o.world_size << " rank(s) on " << o.nodes << " node(s), " << context.memory_from << "; global batch " << plan.global_batch
      << " sequences per step, kept by every layout\n";
  out << "peak: " << context.peak_from << "\ncompute: " << context.rate_from << "\n";
  out << "links (" << context.links_from << "): intra-node " << link_words(o.links.intra_node) << "; inter-node "
      << link_words(o.links.inter_node) << "\n\n";
  out << plan.considered << " layouts considered: " << plan.invalid << " invalid, " << plan.not_covered
      << " not covered by the memory estimate, " << plan.not_fitting << " do not fit, " << plan.ranked.size() << " ranked\n";
  if (!plan.invalid_example.empty()) out << "  invalid, for one: " << plan.invalid_example << "\n";
  if (!plan.not_covered_example.empty()) out << "  not covered, for one: " << plan.not_covered_example << "\n";
  if (!plan.not_fitting_example.empty()) out << "  does not fit, for one: " << plan.not_fitting_example << "\n";
  if (plan.ranked.empty()) {
    out << "\nno layout fits\n";
    return out.str();
  }
  size_t width = 8;
  const size_t shown = std::min<size_t>(plan.ranked.size(), size_t(top));
  for (size_t i = 0; i < shown; ++i) width = std::max(width, plan.ranked[i].choice.describe().size() + 2);
  out << "\n  #  " << left_aligned("layout", width) << std::setw(12) << "memory/rank" << std::setw(12) << "step (ms)" << std::setw(12)
      << "tokens/s" << std::setw(8) << "MFU" << "\n";
  for (size_t i = 0; i < shown; ++i) {
    const PlannedLayout& p = plan.ranked[i];
    out << std::setw(3) << i + 1 << "  " << left_aligned(p.choice.describe(), width) << std::setw(12) << byte_words(p.device_bytes)
        << std::setw(12) << fixed(1e3 * p.cost.step_s, 3) << std::setw(12) << fixed(p.cost.tokens_per_s(), 0) << std::setw(7)
        << fixed(100 * p.cost.mfu(plan.peak_flops, o.world_size), 1) << "%\n";
  }
  const PlannedLayout& best = plan.ranked.front();
  out << "\nthe best layout's projected step:\n";
  for (const CostTerm& t : best.cost.terms) out << "  " << left_aligned(t.name, 40) << std::setw(10) << fixed(1e3 * t.seconds, 3) << " ms  " << t.formula << "\n";
  out << "\nto run it:\n  " << run_line(best, context) << "\n";
  return out.str();
}

nlohmann::json plan_json(const Plan& plan, const PlanOptions& o, const PlanContext& context, int top) {
  auto link_json = [](const Link& l) { return nlohmann::json{{"bus_bytes_per_s", l.bus_bytes_per_s}, {"latency_s", l.latency_s}}; };
  nlohmann::json out = {{"model", context.model},
                        {"world_size", o.world_size},
                        {"nodes", o.nodes},
                        {"device_memory_bytes", int64_t(o.device_memory)},
                        {"global_batch", plan.global_batch},
                        {"peak_flops", plan.peak_flops},
                        {"peak_from", context.peak_from},
                        {"rate_from", context.rate_from},
                        {"efficiency", o.model_flops ? nlohmann::json() : nlohmann::json(o.efficiency)},
                        {"links", {{"from", context.links_from}, {"intra_node", link_json(o.links.intra_node)}, {"inter_node", link_json(o.links.inter_node)}}},
                        {"considered", plan.considered},
                        {"invalid", plan.invalid},
                        {"not_covered", plan.not_covered},
                        {"not_fitting", plan.not_fitting},
                        {"ranked", plan.ranked.size()},
                        {"examples", {{"invalid", plan.invalid_example}, {"not_covered", plan.not_covered_example}, {"not_fitting", plan.not_fitting_example}}}};
  nlohmann::json layouts = nlohmann::json::array();
  for (size_t i = 0; i < std::min<size_t>(plan.ranked.size(), size_t(top)); ++i) {
    const PlannedLayout& p = plan.ranked[i];
    nlohmann::json terms = nlohmann::json::array();
    for (const CostTerm& t : p.cost.terms) terms.push_back({{"name", t.name}, {"seconds", t.seconds}, {"formula", t.formula}});
    layouts.push_back({{"layout", p.choice.describe()},
                       {"dp", p.choice.dp}, {"tp", p.choice.tp}, {"pp", p.choice.pp}, {"cp", p.choice.cp},
                       {"sequence_parallel", p.choice.sequence_parallel}, {"zero_stage", p.choice.zero_stage},
                       {"offload_optimizer", p.choice.offload_optimizer}, {"activation_checkpointing", p.choice.checkpointing},
                       {"micro_batch", p.choice.micro_batch}, {"accumulation", p.choice.accumulation},
                       {"memory_bytes", int64_t(p.device_bytes)}, {"step_s", p.cost.step_s}, {"tokens_per_s", p.cost.tokens_per_s()},
                       {"mfu", p.cost.mfu(plan.peak_flops, o.world_size)}, {"terms", terms}, {"sets", p.choice.sets()}});
  }
  out["top"] = layouts;
  if (!plan.ranked.empty()) out["run"] = run_line(plan.ranked.front(), context);
  return out;
}

}  // namespace dtrain
