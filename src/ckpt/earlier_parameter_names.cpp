#include "ckpt/earlier_parameter_names.h"

#include <algorithm>
#include <regex>
#include <vector>

namespace dtrain {

namespace {

// Each earlier tensor and today's parts of it, in the order of its rows.
const std::vector<std::pair<std::string, std::vector<std::string>>> kFused = {
    {"qkv", {"q_proj", "k_proj", "v_proj"}},
    {"proj", {"o_proj"}},
    {"fc", {"gate_proj", "up_proj"}},
    {"fc_proj", {"down_proj"}},
};

// "<prefix>blocks.N.<part>.<weight|bias>": the prefix ("model/", "optimizer/exp_avg/") with the
// block, the part and the suffix.
const std::regex kBlockTensor(R"(^(.*blocks\.[0-9]+\.)([a-z_]+)(\.(weight|bias))$)");

}  // namespace

EarlierNames earlier_names(const std::map<std::string, GlobalTensor>& expected, const std::map<std::string, GlobalTensor>& stored) {
  EarlierNames out;
  for (const auto& [name, want] : expected) {
    std::smatch m;
    if (stored.count(name) || !std::regex_match(name, m, kBlockTensor)) continue;
    const std::string block = m[1], part = m[2], suffix = m[3];
    for (const auto& [earlier, parts] : kFused) {
      if (std::find(parts.begin(), parts.end(), part) == parts.end()) continue;
      const std::string source = block + earlier + suffix;
      if (!stored.count(source)) break;
      // The parts the model has (GPT-2 has no gate_proj), stacked by rows.
      GlobalTensor fused = want;
      fused.shape.at(0) = 0;
      int64_t offset = -1;
      for (const std::string& p : parts) {
        auto it = expected.find(block + p + suffix);
        if (it == expected.end()) continue;
        if (p == part) offset = fused.shape[0];
        fused.shape[0] += it->second.shape.at(0);
      }
      out.sources[name] = {source, offset};
      out.fused[source] = fused;
      break;
    }
  }
  return out;
}

std::map<std::string, GlobalTensor> as_stored(const std::map<std::string, GlobalTensor>& expected, const EarlierNames& names) {
  std::map<std::string, GlobalTensor> out;
  for (const auto& [name, t] : expected)
    if (!names.sources.count(name)) out[name] = t;
  for (const auto& [name, t] : names.fused) out[name] = t;
  return out;
}

}  // namespace dtrain
