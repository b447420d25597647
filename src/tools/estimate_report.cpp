#include "tools/estimate_report.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "common/byte_words.h"
#include "common/number_text.h"

namespace dtrain {

namespace {

std::string padded(const std::string& s, size_t width) { return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' '); }

// "fits in 80 GiB per rank: 12.3 GiB used (15.4%), 67.7 GiB to spare" or "does not fit ...: ... over".
std::string verdict(const RankEstimate& rank, const EstimateTarget& target) {
  const double need = rank.device_bytes(), have = target.device_memory;
  const MemoryTerm& biggest = rank.largest();
  std::string line = need <= have ? "fits: " + byte_words(need) + " of " + byte_words(have) + " per rank (" + fixed(100 * need / have, 1) +
                                        "%), " + byte_words(have - need) + " to spare"
                                  : "does not fit: " + byte_words(need) + " per rank, " + byte_words(need - have) + " over the " +
                                        byte_words(have);
  return line + "; the biggest term is " + biggest.name + " (" + byte_words(biggest.bytes) + ")";
}

}  // namespace

std::string estimate_table(const MemoryEstimate& e, const EstimateTarget& target, const std::string& layout_line) {
  std::ostringstream out;
  out << layout_line << "\n";
  out << target.world_size << " rank(s) on " << target.nodes << " node(s), " << (target.gpu ? "GPU" : "CPU") << " memory "
      << byte_words(target.device_memory) << " per rank (" << target.device_memory_from << ")\n";
  for (const RankEstimate& rank : e.ranks) {
    size_t width = 32;
    for (const MemoryTerm& t : rank.terms) width = std::max(width, t.name.size() + 2);
    const size_t label = width + 26;  // the name, kind and place columns
    out << "\n" << rank.ranks << " (" << rank.count << "), at its peak: " << rank.peak_moment << "\n";
    out << "  " << padded("term", width) << padded("kind", 18) << padded("where", 8) << std::setw(12) << "bytes" << "  formula\n";
    for (const MemoryTerm& t : rank.terms)
      out << "  " << padded(t.name, width) << padded(memory_kind_name(t.kind), 18) << padded(memory_place_name(t.place), 8) << std::setw(12)
          << byte_words(t.bytes) << "  " << t.formula << "\n";
    out << "  " << padded("tensors (what a run measures)", label) << std::setw(12) << byte_words(rank.tensor_bytes()) << "\n";
    out << "  " << padded("total per rank, device", label) << std::setw(12) << byte_words(rank.device_bytes()) << "\n";
    for (const MemoryPlace place : {MemoryPlace::Host, MemoryPlace::Nvme})
      if (rank.bytes(place) > 0)
        out << "  " << padded("total per rank, " + memory_place_name(place), label) << std::setw(12) << byte_words(rank.bytes(place)) << "\n";
  }
  const RankEstimate& most = e.most_loaded();
  out << "\nper node (" << target.ranks_per_node() << " ranks): " << byte_words(most.device_bytes() * target.ranks_per_node())
      << " device";
  for (const MemoryPlace place : {MemoryPlace::Host, MemoryPlace::Nvme})
    if (most.bytes(place) > 0) out << ", " << byte_words(most.bytes(place) * target.ranks_per_node()) << " " << memory_place_name(place);
  out << "\n" << verdict(most, target) << "\n";
  return out.str();
}

nlohmann::json estimate_json(const MemoryEstimate& e, const EstimateTarget& target, const std::string& layout_line) {
  nlohmann::json out = {{"layout", layout_line},   {"world_size", target.world_size}, {"nodes", target.nodes},
                        {"ranks_per_node", target.ranks_per_node()}, {"device", target.gpu ? "gpu" : "cpu"},
                        {"device_memory_bytes", int64_t(target.device_memory)}, {"device_memory_from", target.device_memory_from}};
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankEstimate& rank : e.ranks) {
    nlohmann::json terms = nlohmann::json::array();
    for (const MemoryTerm& t : rank.terms)
      terms.push_back({{"name", t.name}, {"kind", memory_kind_name(t.kind)}, {"where", memory_place_name(t.place)},
                       {"bytes", int64_t(t.bytes)}, {"formula", t.formula}});
    ranks.push_back({{"ranks", rank.ranks}, {"count", rank.count}, {"peak_moment", rank.peak_moment}, {"terms", terms},
                     {"tensor_bytes", int64_t(rank.tensor_bytes())}, {"device_bytes", int64_t(rank.device_bytes())},
                     {"host_bytes", int64_t(rank.bytes(MemoryPlace::Host))}, {"nvme_bytes", int64_t(rank.bytes(MemoryPlace::Nvme))}});
  }
  const RankEstimate& most = e.most_loaded();
  out["ranks"] = ranks;
  out["total_bytes"] = int64_t(most.device_bytes());
  out["node_bytes"] = int64_t(most.device_bytes() * target.ranks_per_node());
  out["node_host_bytes"] = int64_t(most.bytes(MemoryPlace::Host) * target.ranks_per_node());
  out["node_nvme_bytes"] = int64_t(most.bytes(MemoryPlace::Nvme) * target.ranks_per_node());
  out["fits"] = most.device_bytes() <= target.device_memory;
  out["margin_bytes"] = int64_t(target.device_memory - most.device_bytes());
  out["largest_term"] = most.largest().name;
  return out;
}

}  // namespace dtrain
