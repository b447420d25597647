#include <gtest/gtest.h>

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
