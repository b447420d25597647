#include "optim/decay_spans.h"

#include <algorithm>

namespace dtrain {

Spans spans_within(const Spans& spans, int64_t begin, int64_t numel) {
  Spans inside;
  for (const Span& s : spans) {
    const int64_t from = std::max(s.offset, begin), to = std::min(s.offset + s.numel, begin + numel);
    if (from < to) inside.push_back({from - begin, to - from});
  }
  return inside;
}

}  // namespace dtrain
