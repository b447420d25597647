#include "data/patch_grid.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace dtrain {

void validate(const PatchOptions& options) {
  auto require = [](bool ok, const std::string& key, int64_t value, const std::string& rule) {
    if (!ok) throw std::invalid_argument(key + " must be " + rule + ", got " + std::to_string(value));
  };
  require(options.patch_size >= 1, "model.vision.patch_size", options.patch_size, "at least 1");
  require(options.merge == 1 || options.merge == 2, "model.vision.merge", options.merge, "1 or 2");
  require(options.max_grid >= options.merge, "model.vision.max_grid", options.max_grid,
          "at least model.vision.merge (" + std::to_string(options.merge) + ")");
  require(options.max_image_tokens >= 1, "data.max_image_tokens", options.max_image_tokens, "at least 1");
  require(options.channels == 1 || options.channels == 3, "model.vision.channels", options.channels, "1 or 3");
}

PatchGrid fit_patch_grid(int64_t height, int64_t width, const PatchOptions& options) {
  const int64_t m = options.merge;
  const int64_t side_limit = options.max_grid / m * m;
  const double ideal_h = double(height) / options.patch_size, ideal_w = double(width) / options.patch_size;
  // The one scale that meets the three limits together: gh·gw <= max_image_tokens·m², each side <= side_limit.
  double scale = std::min(1.0, std::sqrt(double(options.max_image_tokens * m * m) / (ideal_h * ideal_w)));
  scale = std::min({scale, side_limit / ideal_h, side_limit / ideal_w});
  auto side = [&](double ideal) {
    return std::clamp(int64_t(std::llround(ideal * scale / double(m))) * m, m, side_limit);
  };
  PatchGrid grid{side(ideal_h), side(ideal_w)};
  // Rounding to multiples of m may overshoot the token budget by a row or a column: take them back
  // from the side that rounding stretched the most, which keeps the aspect closest.
  while (image_tokens(grid, options.merge) > options.max_image_tokens) {
    const bool shrink_height =
        grid.width == m || (grid.height > m && grid.height / ideal_h > grid.width / ideal_w);
    (shrink_height ? grid.height : grid.width) -= m;
  }
  return grid;
}

int64_t image_tokens(PatchGrid grid, int merge) { return (grid.height / merge) * (grid.width / merge); }

}  // namespace dtrain
