// What a traced run's collectives carried (trace.json, train.trace=true: each op's name and shape
// per rank), and the check that they carried the trainable parameters' gradients and units and
// nothing of the frozen ones, for the tests of parallel.modules.
#pragma once
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace dtrain::test {

// A model's parameter counts under a plan: every one, those frozen and those kept whole (zero_stage 0).
struct PlanCounts {
  int64_t total = 0, frozen = 0, whole = 0;
};

namespace detail {

inline int64_t elements(const nlohmann::json& shape) {
  int64_t n = 1;
  for (const nlohmann::json& d : shape) n *= d.get<int64_t>();
  return n;
}

inline bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace detail

// Per rank, every collective op the trace holds: by name (op and label), the element counts it carried.
inline std::map<int, std::map<std::string, std::vector<int64_t>>> traced_ops(const std::string& run_dir) {
  std::ifstream in(run_dir + "/trace.json");
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::map<int, std::map<std::string, std::vector<int64_t>>> out;
  for (const nlohmann::json& e : trace.at("traceEvents"))
    if (e.value("cat", "") == "comm")
      out[e.at("pid").get<int>()][e.at("name").get<std::string>()].push_back(detail::elements(e.at("args").at("shape")));
  return out;
}

// What ZeRO stage 3 under a plan communicated, on each rank: the gradients of the sharded parameters
// reduce-scattered (their buckets padded to a multiple of the ranks, less than one element a rank
// each), those kept whole all-reduced whole, each bucket once per step; the sharded units gathered
// (each rank's piece), the whole ones never; and nothing else but scalars (loss, norm, checks) and the
// end-of-run memory report. The
// frozen parameters are more than all the padding, so none of them can hide in it.
inline void expect_only_trainable_parameters_communicated(const std::string& run_dir, const PlanCounts& c, int steps, int ranks) {
  const int64_t sharded = c.total - c.frozen - c.whole;
  const auto ops = traced_ops(run_dir);
  ASSERT_EQ(int(ops.size()), ranks);
  for (const auto& [rank, by_name] : ops) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    int64_t scattered = 0, whole = 0, gathered = 0, buckets = 0, units = 0;
    for (const auto& [name, sizes] : by_name) {
      const std::set<int64_t> distinct(sizes.begin(), sizes.end());
      EXPECT_EQ(distinct.size(), 1u) << name << " carried different sizes";
      const int64_t n = *distinct.begin();
      if (detail::starts_with(name, "reduce_scatter zero-2:bucket ")) {
        EXPECT_EQ(int(sizes.size()), steps) << name;
        scattered += n;
        ++buckets;
      } else if (detail::starts_with(name, "all_reduce zero:whole bucket ")) {
        EXPECT_EQ(int(sizes.size()), steps) << name;
        whole += n;
      } else if (detail::starts_with(name, "all_gather zero-3:all-gather unit ")) {
        gathered += n * ranks;
        ++units;
      } else if (name == "all_gather memory report") {
        EXPECT_EQ(int(sizes.size()), 1) << name << " is sent once, at the run's end";
      } else {
        EXPECT_LE(n, 3) << name << " carries more than a scalar's few elements";
      }
    }
    EXPECT_EQ(whole, c.whole) << "the gradients of the parameters kept whole, all-reduced whole";
    EXPECT_GE(scattered, sharded);
    EXPECT_LE(scattered, sharded + buckets * (ranks - 1)) << "more reduce-scattered than the sharded parameters and their padding";
    EXPECT_GE(gathered, sharded);
    EXPECT_LE(gathered, sharded + units * (ranks - 1)) << "more gathered than the sharded parameters and their padding";
    EXPECT_GT(c.frozen, (buckets + units) * (ranks - 1)) << "the padding could hide the frozen parameters";
  }
}

}  // namespace dtrain::test
