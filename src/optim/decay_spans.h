// Where weight decay applies, as runs of a flat buffer: a mask of one float per element would cost
// as much memory as the parameters themselves. Weight decay skips biases and norm weights, so a
// transformer's buffer is a few hundred runs.
#pragma once
#include <cstdint>
#include <vector>

namespace dtrain {

struct Span {
  int64_t offset = 0, numel = 0;
  bool operator==(const Span& o) const { return offset == o.offset && numel == o.numel; }
};
using Spans = std::vector<Span>;

// The parts of `spans` (sorted, disjoint) inside [begin, begin + numel), as offsets from `begin`.
Spans spans_within(const Spans& spans, int64_t begin, int64_t numel);

}  // namespace dtrain
