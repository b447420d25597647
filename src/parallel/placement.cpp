#include "parallel/placement.h"

#include <algorithm>
#include <stdexcept>

namespace dtrain {

namespace {

const MeshCoordinate* find_coordinate(const std::vector<MeshCoordinate>& coords, const std::string& dim) {
  for (const auto& c : coords)
    if (c.dim == dim) return &c;
  return nullptr;
}

// Row-major strides of a box: elements between neighbours along each dim.
std::vector<int64_t> strides(const Box& box) {
  std::vector<int64_t> out(box.size.size(), 1);
  for (size_t d = box.size.size(); d-- > 1;) out[d - 1] = out[d] * box.size[d];
  return out;
}

// The global coordinates of element `index` of `piece` (in its own order), "[3, 7]".
std::string coordinates(const LocalPiece& piece, int64_t index) {
  int64_t at = flat_range(piece).first + index;
  const std::vector<int64_t> stride = strides(piece.box);
  std::string out = "[";
  for (size_t d = 0; d < stride.size(); ++d) {
    out += (d ? ", " : "") + std::to_string(piece.box.offset[d] + at / stride[d]);
    at %= stride[d];
  }
  return out + "]";
}

std::optional<LocalPiece> apply_placements(const ParamSpec& spec, const std::vector<MeshCoordinate>& coords, bool flat_shards) {
  LocalPiece piece = whole_tensor(spec.shape);
  bool flat_cut = false;
  for (const auto& [dim, p] : spec.placements) {
    const MeshCoordinate* at = find_coordinate(coords, dim);
    const int coord = at ? at->coord : 0, size = at ? at->size : 1;
    auto bad = [&](const std::string& what) {
      return std::invalid_argument("parameter '" + spec.name + "', mesh dim '" + dim + "': " + what);
    };
    switch (p.kind) {
      case Placement::Kind::Replicate:
        break;
      case Placement::Kind::Stages:
        if (std::find(p.stages.begin(), p.stages.end(), coord) == p.stages.end()) return std::nullopt;
        break;
      case Placement::Kind::Shard: {
        if (p.dim < 0 || size_t(p.dim) >= spec.shape.size())
          throw bad("shards tensor dim " + std::to_string(p.dim) + ", which a " + std::to_string(spec.shape.size()) + "-d tensor lacks");
        if (flat_cut) throw bad("shards tensor dim " + std::to_string(p.dim) + " after a flat shard, which cuts no tensor dim");
        int64_t& extent = piece.box.size[size_t(p.dim)];
        const auto [begin, end] = chunk_range(extent, coord, size);
        piece.box.offset[size_t(p.dim)] += begin;
        extent = end - begin;
        break;
      }
      case Placement::Kind::FlatShard: {
        flat_cut = true;
        if (!flat_shards) break;
        const auto [begin, end] = even_flat_range(numel(piece), coord, size);
        piece = narrow(piece, begin, end);
        break;
      }
    }
  }
  return piece;
}

}  // namespace

std::pair<int64_t, int64_t> chunk_range(int64_t extent, int coord, int size) {
  const int64_t chunk = (extent + size - 1) / size;
  const int64_t begin = std::min(extent, coord * chunk);
  return {begin, std::min(extent, begin + chunk)};
}

int64_t numel(const Box& box) {
  int64_t n = 1;
  for (int64_t s : box.size) n *= s;
  return n;
}

int64_t numel(const LocalPiece& piece) {
  const auto [begin, end] = flat_range(piece);
  return end - begin;
}

std::pair<int64_t, int64_t> flat_range(const LocalPiece& piece) {
  return {piece.flat_begin, piece.flat_end < 0 ? numel(piece.box) : piece.flat_end};
}

bool is_whole_box(const LocalPiece& piece) { return flat_range(piece) == std::pair<int64_t, int64_t>{0, numel(piece.box)}; }

LocalPiece whole_tensor(const std::vector<int64_t>& shape) { return {{std::vector<int64_t>(shape.size(), 0), shape}, 0, -1}; }

LocalPiece narrow(const LocalPiece& piece, int64_t begin, int64_t end) {
  const int64_t n = numel(piece);
  if (begin < 0 || begin > end || end > n)
    throw std::invalid_argument("elements " + std::to_string(begin) + ".." + std::to_string(end - 1) + " of a piece of " +
                                std::to_string(n) + " elements (" + describe(piece) + ")");
  const int64_t first = flat_range(piece).first;
  LocalPiece out = piece;
  out.flat_begin = first + begin;
  out.flat_end = first + end;
  return out;
}

std::pair<int64_t, int64_t> even_flat_range(int64_t numel, int coord, int size) {
  const int64_t part = (numel + size - 1) / size;
  const int64_t begin = std::min(numel, part * coord);
  return {begin, std::min(numel, begin + part)};
}

std::string describe(const LocalPiece& piece) {
  std::string out = "[";
  for (size_t d = 0; d < piece.box.size.size(); ++d)
    out += (d ? ", " : "") + std::to_string(piece.box.offset[d]) + ":" + std::to_string(piece.box.offset[d] + piece.box.size[d]);
  out += "]";
  if (!is_whole_box(piece)) {
    const auto [begin, end] = flat_range(piece);
    out += " elements " + std::to_string(begin) + ".." + std::to_string(end - 1);
  }
  return out;
}

std::optional<LocalPiece> local_piece(const ParamSpec& spec, const std::vector<MeshCoordinate>& coords) {
  return apply_placements(spec, coords, true);
}

std::optional<LocalPiece> local_box(const ParamSpec& spec, const std::vector<MeshCoordinate>& coords) {
  return apply_placements(spec, coords, false);
}

bool writes_piece(const ParamSpec& spec, const std::vector<MeshCoordinate>& coords) {
  for (const auto& [dim, p] : spec.placements) {
    const MeshCoordinate* at = find_coordinate(coords, dim);
    if (p.kind == Placement::Kind::Stages && (p.stages.empty() || p.stages.front() != (at ? at->coord : 0))) return false;
    if (p.kind == Placement::Kind::Replicate && at && at->coord != 0) return false;
  }
  return true;
}

std::vector<SharedRun> shared_runs(const LocalPiece& a, const LocalPiece& b) {
  const size_t dims = a.box.size.size();
  if (b.box.size.size() != dims)
    throw std::invalid_argument("pieces " + describe(a) + " and " + describe(b) + " are of tensors with different numbers of dims");
  std::vector<int64_t> lo(dims), hi(dims);
  for (size_t d = 0; d < dims; ++d) {
    lo[d] = std::max(a.box.offset[d], b.box.offset[d]);
    hi[d] = std::min(a.box.offset[d] + a.box.size[d], b.box.offset[d] + b.box.size[d]);
    if (hi[d] <= lo[d]) return {};
  }
  const auto [a_first, a_end] = flat_range(a);
  const auto [b_first, b_end] = flat_range(b);
  // A row runs over dims [inner, dims): every dim after `inner` is spanned whole by the intersection
  // and by both boxes, so a row's elements are consecutive in each box.
  size_t inner = dims == 0 ? 0 : dims - 1;
  auto whole_in_both = [&](size_t d) { return hi[d] - lo[d] == a.box.size[d] && hi[d] - lo[d] == b.box.size[d]; };
  while (inner > 0 && whole_in_both(inner)) --inner;
  int64_t row = 1;
  for (size_t d = inner; d < dims; ++d) row *= hi[d] - lo[d];
  const std::vector<int64_t> a_stride = strides(a.box), b_stride = strides(b.box);
  std::vector<int64_t> index = lo;  // the row's first element, global coordinates; dims before `inner` count rows
  std::vector<SharedRun> runs;
  while (true) {
    int64_t a_start = 0, b_start = 0;  // the row's first element in each box's order
    for (size_t d = 0; d < dims; ++d) {
      a_start += (index[d] - a.box.offset[d]) * a_stride[d];
      b_start += (index[d] - b.box.offset[d]) * b_stride[d];
    }
    if (a_start >= a_end || b_start >= b_end) break;  // rows only go further in both orders
    const int64_t from = std::max({int64_t(0), a_first - a_start, b_first - b_start});
    const int64_t to = std::min({row, a_end - a_start, b_end - b_start});
    if (from < to) {
      const SharedRun run{a_start + from - a_first, b_start + from - b_first, to - from};
      if (!runs.empty() && runs.back().a_offset + runs.back().numel == run.a_offset &&
          runs.back().b_offset + runs.back().numel == run.b_offset)
        runs.back().numel += run.numel;
      else
        runs.push_back(run);
    }
    size_t d = inner;  // the next row: an odometer over dims [0, inner)
    while (d > 0 && ++index[d - 1] == hi[d - 1]) {
      index[d - 1] = lo[d - 1];
      --d;
    }
    if (d == 0) break;
  }
  return runs;
}

std::string coverage_error(const std::vector<LocalPiece>& pieces, const LocalPiece& target, const std::string& noun) {
  std::vector<std::pair<int64_t, int64_t>> held;  // (first element in target's order, count)
  for (const LocalPiece& p : pieces)
    for (const SharedRun& r : shared_runs(target, p)) held.emplace_back(r.a_offset, r.numel);
  std::sort(held.begin(), held.end());
  const bool with_coordinates = target.box.size.size() > 1;
  auto where = [&](int64_t index) { return with_coordinates ? " (from " + coordinates(target, index) + ")" : std::string(); };
  auto missed = [&](int64_t from, int64_t to) {
    return "no " + noun + " holds elements " + std::to_string(from) + ".." + std::to_string(to - 1) + where(from);
  };
  int64_t next = 0;
  for (const auto& [first, n] : held) {
    if (first > next) return missed(next, first);
    if (first < next) return "elements from " + std::to_string(first) + " are held by two " + noun + "s" + where(first);
    next = first + n;
  }
  if (next < numel(target)) return missed(next, numel(target));
  return "";
}

}  // namespace dtrain
