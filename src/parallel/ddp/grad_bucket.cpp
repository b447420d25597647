#include "parallel/ddp/grad_bucket.h"

namespace dtrain {

std::vector<GradBucket> make_grad_buckets(const std::vector<FlatEntry>& entries, int64_t element_bytes,
                                          int64_t bucket_bytes, const KeptWhole& kept_whole) {
  std::vector<GradBucket> buckets;
  GradBucket current;
  for (int i = 0; i < int(entries.size()); ++i) {
    const bool whole = kept_whole && kept_whole(entries[i].name);
    if (current.entries > 0 && whole != current.whole) {
      buckets.push_back(current);
      current = GradBucket{};
    }
    if (current.entries == 0) current = {entries[i].offset, 0, i, 0, whole};
    current.numel += entries[i].numel;
    current.entries += 1;
    if (current.numel * element_bytes >= bucket_bytes) {
      buckets.push_back(current);
      current = GradBucket{};
    }
  }
  if (current.entries > 0) buckets.push_back(current);
  return buckets;
}

}  // namespace dtrain
