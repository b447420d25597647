#include <gtest/gtest.h>

#include <tuple>

#include "parallel/ddp/grad_bucket.h"

using namespace dtrain;

TEST(GradBuckets, SliceTheFlatBufferWithoutSplittingAParameter) {
  std::vector<FlatEntry> entries;
  int64_t offset = 0;
  for (int64_t n : {100, 300, 50, 50, 400, 10}) {
    entries.push_back({"p", {}, offset, n, true});
    offset += n;
  }
  const auto buckets = make_grad_buckets(entries, 4, 1200);  // 300 floats per bucket
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].offset, 0);
  EXPECT_EQ(buckets[0].numel, 400);
  EXPECT_EQ(buckets[0].entries, 2);
  EXPECT_EQ(buckets[1].first_entry, 2);
  EXPECT_EQ(buckets[1].numel, 500);
  EXPECT_EQ(buckets[2].offset, 900);
  EXPECT_EQ(buckets[2].numel, 10);
  int64_t total = 0;
  for (const auto& b : buckets) total += b.numel;
  EXPECT_EQ(total, offset);
  EXPECT_EQ(make_grad_buckets(entries, 4, int64_t(1) << 40).size(), 1u);
}

// Under ZeRO the parameters kept whole on every rank (parallel.modules zero_stage 0) never share a
// bucket with others, and their buckets say so; within a run of them the size rule holds.
TEST(GradBuckets, ParametersKeptWholeGetBucketsOfTheirOwn) {
  std::vector<FlatEntry> entries;
  int64_t offset = 0;
  const std::vector<std::pair<std::string, int64_t>> params = {{"a", 100}, {"w1", 100}, {"w2", 300}, {"w3", 100}, {"b", 50}, {"c", 50}};
  for (const auto& [name, n] : params) {
    entries.push_back({name, {}, offset, n, true});
    offset += n;
  }
  const auto buckets = make_grad_buckets(entries, 4, 1200, [](const std::string& name) { return name[0] == 'w'; });
  // a | w1 w2 (full at 400) | w3 | b c
  ASSERT_EQ(buckets.size(), 4u);
  const std::vector<std::tuple<int, int, bool>> expected = {{0, 1, false}, {1, 2, true}, {3, 1, true}, {4, 2, false}};
  for (size_t b = 0; b < buckets.size(); ++b) {
    EXPECT_EQ(buckets[b].first_entry, std::get<0>(expected[b])) << "bucket " << b;
    EXPECT_EQ(buckets[b].entries, std::get<1>(expected[b])) << "bucket " << b;
    EXPECT_EQ(buckets[b].whole, std::get<2>(expected[b])) << "bucket " << b;
  }
  for (const auto& b : make_grad_buckets(entries, 4, 1200)) EXPECT_FALSE(b.whole);
}
