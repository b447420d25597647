// Placements without communication: the piece each rank holds under Shard, FlatShard and their
// nesting, who writes it, the elements two pieces share (boxes, flat ranges of boxes, and flat ranges
// of dim-1 slices, which are not contiguous in the global tensor), and coverage, each against a
// brute-force enumeration of elements.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <stdexcept>

#include "parallel/placement.h"
#include "support/error_of.h"

using namespace dtrain;

namespace {

using Kind = Placement::Kind;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

using dtrain::test::error_of;

// The global flat index of each element of `piece` of a tensor of `shape`, in the piece's own order.
std::vector<int64_t> elements(const LocalPiece& piece, const std::vector<int64_t>& shape) {
  std::vector<int64_t> out;
  const size_t dims = shape.size();
  std::vector<int64_t> index(dims, 0);
  for (int64_t k = 0; k < numel(piece.box); ++k) {
    int64_t rest = k, global = 0;
    for (size_t d = dims; d-- > 0;) {
      index[d] = rest % piece.box.size[d];
      rest /= piece.box.size[d];
    }
    for (size_t d = 0; d < dims; ++d) global = global * shape[d] + piece.box.offset[d] + index[d];
    out.push_back(global);
  }
  const auto [begin, end] = flat_range(piece);
  return {out.begin() + begin, out.begin() + end};
}

// (index in a, index in b) for every element both hold, as shared_runs reports them.
std::vector<std::pair<int64_t, int64_t>> expand(const std::vector<SharedRun>& runs) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& r : runs)
    for (int64_t i = 0; i < r.numel; ++i) out.emplace_back(r.a_offset + i, r.b_offset + i);
  return out;
}

// The same, by enumerating both pieces.
std::vector<std::pair<int64_t, int64_t>> brute_force_shared(const LocalPiece& a, const LocalPiece& b, const std::vector<int64_t>& shape) {
  std::map<int64_t, int64_t> in_b;
  const auto eb = elements(b, shape);
  for (size_t i = 0; i < eb.size(); ++i) in_b[eb[i]] = int64_t(i);
  std::vector<std::pair<int64_t, int64_t>> out;
  const auto ea = elements(a, shape);
  for (size_t i = 0; i < ea.size(); ++i)
    if (auto it = in_b.find(ea[i]); it != in_b.end()) out.emplace_back(int64_t(i), it->second);
  return out;
}

ParamSpec spec(std::vector<int64_t> shape, std::vector<std::pair<std::string, Placement>> placements) {
  return {"blocks.0.o_proj.weight", std::move(shape), at::kFloat, std::move(placements)};
}

}  // namespace

TEST(Placement, ShardCutsATensorDimEvenlyAndRefusesAnUnevenSplitByName) {
  const ParamSpec column = spec({8, 6}, {{"tp", Placement::shard(0)}});
  const auto piece = local_piece(column, {{"tp", 1, 2}});
  ASSERT_TRUE(piece);
  EXPECT_EQ(piece->box.offset, (std::vector<int64_t>{4, 0}));
  EXPECT_EQ(piece->box.size, (std::vector<int64_t>{4, 6}));
  EXPECT_TRUE(is_whole_box(*piece));
  EXPECT_EQ(describe(*piece), "[4:8, 0:6]");
  const auto row = local_piece(spec({8, 6}, {{"tp", Placement::shard(1)}}), {{"tp", 2, 3}});
  EXPECT_EQ(row->box.offset, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(row->box.size, (std::vector<int64_t>{8, 2}));
  // A dim the coordinates do not name has one rank: the whole tensor.
  EXPECT_EQ(local_piece(column, {})->box.size, (std::vector<int64_t>{8, 6}));

  // A dim that does not divide is cut as torch.chunk cuts it: 6 over 4 is 2, 2, 2 and nothing.
  for (const auto& [coord, offset, size] : std::vector<std::tuple<int, int64_t, int64_t>>{{0, 0, 2}, {2, 4, 2}, {3, 6, 0}}) {
    const auto uneven = local_piece(spec({8, 6}, {{"tp", Placement::shard(1)}}), {{"tp", coord, 4}});
    EXPECT_EQ(uneven->box.offset[1], offset) << coord;
    EXPECT_EQ(uneven->box.size[1], size) << coord;
  }
  const std::string lacking = error_of([] { local_piece(spec({8}, {{"tp", Placement::shard(1)}}), {{"tp", 0, 2}}); });
  EXPECT_TRUE(contains(lacking, "mesh dim 'tp': shards tensor dim 1, which a 1-d tensor lacks")) << lacking;
  const std::string after_flat =
      error_of([] { local_piece(spec({8, 6}, {{"dp_shard", Placement::flat_shard()}, {"tp", Placement::shard(0)}}), {}); });
  EXPECT_TRUE(contains(after_flat, "after a flat shard")) << after_flat;
}

TEST(Placement, FlatShardSplitsThePieceIntoEqualPaddedRangesAsZeroCutsABucket) {
  EXPECT_EQ(even_flat_range(10, 0, 4), (std::pair<int64_t, int64_t>{0, 3}));
  EXPECT_EQ(even_flat_range(10, 3, 4), (std::pair<int64_t, int64_t>{9, 10}));
  EXPECT_EQ(even_flat_range(2, 3, 4), (std::pair<int64_t, int64_t>{2, 2}));  // padding only: an empty range
  const ParamSpec zero = spec({5, 2}, {{"dp_shard", Placement::flat_shard()}});
  const auto last = local_piece(zero, {{"dp_shard", 3, 4}});
  EXPECT_EQ(flat_range(*last), (std::pair<int64_t, int64_t>{9, 10}));
  EXPECT_EQ(describe(*last), "[0:5, 0:2] elements 9..9");
  // local_box leaves the flat cut to whoever decides the ranges (ZeRO's buckets).
  EXPECT_TRUE(is_whole_box(*local_box(zero, {{"dp_shard", 3, 4}})));
  // Ranges are counted in the piece's own order, and compose.
  const LocalPiece part = narrow(narrow(whole_tensor({5, 2}), 2, 8), 1, 3);
  EXPECT_EQ(flat_range(part), (std::pair<int64_t, int64_t>{3, 5}));
  EXPECT_THROW(narrow(part, 1, 3), std::invalid_argument);
}

// Tensor parallelism on dim 1 inside, ZeRO over dp_shard: each rank holds a flat range of a column
// slice, and all ranks' pieces together hold every element once.
TEST(Placement, NestedShardAndFlatShardCoverTheTensorExactlyOnce) {
  const std::vector<int64_t> shape = {6, 8};
  const ParamSpec nested = spec(shape, {{"dp_shard", Placement::flat_shard()}, {"tp", Placement::shard(1)}});
  EXPECT_TRUE(contains(error_of([&] { local_piece(nested, {}); }), "after a flat shard"));
  const ParamSpec tp_then_zero = spec(shape, {{"tp", Placement::shard(1)}, {"dp_shard", Placement::flat_shard()}});
  std::vector<LocalPiece> pieces;
  std::vector<int> count(48, 0);
  for (int tp = 0; tp < 2; ++tp)
    for (int dp = 0; dp < 3; ++dp) {
      const auto p = local_piece(tp_then_zero, {{"tp", tp, 2}, {"dp_shard", dp, 3}});
      ASSERT_TRUE(p);
      EXPECT_EQ(p->box.size, (std::vector<int64_t>{6, 4}));
      EXPECT_EQ(numel(*p), 8);
      for (int64_t e : elements(*p, shape)) ++count[size_t(e)];
      pieces.push_back(*p);
    }
  for (int c : count) EXPECT_EQ(c, 1);
  EXPECT_EQ(coverage_error(pieces, whole_tensor(shape)), "");
  pieces.pop_back();
  EXPECT_EQ(coverage_error(pieces, whole_tensor(shape), "chunk"), "no chunk holds elements 36..39 (from [4, 4])");
  pieces.push_back(pieces[0]);
  EXPECT_EQ(coverage_error(pieces, whole_tensor(shape)), "elements from 0 are held by two pieces (from [0, 0])");
}

TEST(Placement, TheWriterIsTheRankAtCoordinateZeroOfEveryReplicatedDim) {
  const ParamSpec hybrid = spec({4, 4}, {{"dp_replicate", Placement::replicate()}, {"dp_shard", Placement::flat_shard()}});
  EXPECT_TRUE(writes_piece(hybrid, {{"dp_replicate", 0, 2}, {"dp_shard", 3, 4}}));
  EXPECT_FALSE(writes_piece(hybrid, {{"dp_replicate", 1, 2}, {"dp_shard", 0, 4}}));
  const ParamSpec frozen = spec({4}, {{"dp_replicate", Placement::replicate()}, {"dp_shard", Placement::replicate()}});
  EXPECT_TRUE(writes_piece(frozen, {{"dp_replicate", 0, 1}, {"dp_shard", 0, 4}}));
  EXPECT_FALSE(writes_piece(frozen, {{"dp_replicate", 0, 1}, {"dp_shard", 2, 4}}));
  // A pipeline stage's block: held and written by its stage alone.
  const ParamSpec block = spec({4}, {{"pp", Placement::held_by({1})}, {"dp_shard", Placement::replicate()}});
  EXPECT_FALSE(local_piece(block, {{"pp", 0, 2}}));
  EXPECT_FALSE(writes_piece(block, {{"pp", 0, 2}, {"dp_shard", 0, 1}}));
  EXPECT_TRUE(local_piece(block, {{"pp", 1, 2}}));
  EXPECT_TRUE(writes_piece(block, {{"pp", 1, 2}, {"dp_shard", 0, 1}}));
  // A tied embedding on the first and the last of 4 stages: both hold it whole, the first writes it.
  const ParamSpec tied = spec({4}, {{"pp", Placement::held_by({0, 3})}});
  for (int stage : {0, 3}) EXPECT_EQ(numel(*local_piece(tied, {{"pp", stage, 4}})), 4);
  EXPECT_FALSE(local_piece(tied, {{"pp", 1, 4}}));
  EXPECT_TRUE(writes_piece(tied, {{"pp", 0, 4}}));
  EXPECT_FALSE(writes_piece(tied, {{"pp", 3, 4}}));
  // A dim the spec does not name leaves the writing alone.
  EXPECT_TRUE(writes_piece(spec({4}, {{"dp_shard", Placement::replicate()}}), {{"pp", 1, 2}, {"dp_shard", 0, 2}}));
}

TEST(Placement, TwoWholeTensorPiecesShareOneRunAndFlatRangesOfOneBoxAnother) {
  const std::vector<SharedRun> whole = shared_runs(whole_tensor({3, 4, 5}), whole_tensor({3, 4, 5}));
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].numel, 60);
  const std::vector<SharedRun> flat = shared_runs(narrow(whole_tensor({3, 4, 5}), 7, 40), narrow(whole_tensor({3, 4, 5}), 20, 59));
  ASSERT_EQ(flat.size(), 1u);
  EXPECT_EQ(flat[0].a_offset, 13);
  EXPECT_EQ(flat[0].b_offset, 0);
  EXPECT_EQ(flat[0].numel, 20);
  EXPECT_TRUE(shared_runs(narrow(whole_tensor({10}), 0, 5), narrow(whole_tensor({10}), 5, 10)).empty());
  const std::vector<SharedRun> scalar = shared_runs(whole_tensor({}), whole_tensor({}));
  ASSERT_EQ(scalar.size(), 1u);
  EXPECT_EQ(scalar[0].numel, 1);
}

// The case a flat-only description could not state: ZeRO's flat range of a row-parallel (dim-1) slice,
// whose elements are one run per row of the global tensor, read back by a rank that holds another
// flat range of another dim-1 slice.
TEST(Placement, FlatRangesOfDimOneSlicesShareExactlyTheElementsBothHold) {
  const std::vector<int64_t> shape = {4, 6};
  const LocalPiece a = narrow({{{0, 0}, {4, 3}}}, 2, 9);    // columns 0..2, elements 2..8 of that slice
  const LocalPiece b = narrow({{{0, 2}, {4, 4}}}, 1, 11);   // columns 2..5, elements 1..10 of that slice
  const auto runs = shared_runs(a, b);
  EXPECT_EQ(expand(runs), brute_force_shared(a, b, shape));
  EXPECT_EQ(runs.size(), 2u);  // column 2 of rows 1 and 2
  EXPECT_EQ(expand(shared_runs(b, a)).size(), runs.size());

  // Random boxes and flat ranges of a 3-d tensor, in both orders, against the enumeration; and the
  // pieces of a layout that cuts dim 1 then flat ranges cover the tensor exactly once.
  const std::vector<int64_t> cube = {4, 5, 6};
  std::mt19937 rng(25);
  auto random_piece = [&] {
    LocalPiece p;
    for (int64_t s : cube) {
      const int64_t lo = int64_t(rng() % uint32_t(s)), hi = lo + 1 + int64_t(rng() % uint32_t(s - lo));
      p.box.offset.push_back(lo);
      p.box.size.push_back(hi - lo);
    }
    const int64_t n = numel(p.box), begin = int64_t(rng() % uint32_t(n)), end = begin + 1 + int64_t(rng() % uint32_t(n - begin));
    return rng() % 3 == 0 ? p : narrow(p, begin, end);
  };
  for (int i = 0; i < 2000; ++i) {
    const LocalPiece p = random_piece(), q = random_piece();
    ASSERT_EQ(expand(shared_runs(p, q)), brute_force_shared(p, q, cube)) << describe(p) << " with " << describe(q);
  }
  const ParamSpec row_parallel_zero = spec(cube, {{"tp", Placement::shard(1)}, {"dp_shard", Placement::flat_shard()}});
  std::vector<LocalPiece> pieces;
  for (int tp = 0; tp < 5; ++tp)
    for (int dp = 0; dp < 7; ++dp) pieces.push_back(*local_piece(row_parallel_zero, {{"tp", tp, 5}, {"dp_shard", dp, 7}}));
  EXPECT_EQ(coverage_error(pieces, whole_tensor(cube)), "");
  // And they cover any one rank's piece under another layout, which is what a resharded load asks.
  const LocalPiece asked = *local_piece(spec(cube, {{"tp", Placement::shard(2)}, {"dp_shard", Placement::flat_shard()}}),
                                        {{"tp", 1, 2}, {"dp_shard", 1, 3}});
  EXPECT_EQ(coverage_error(pieces, asked), "");
  pieces.erase(pieces.begin() + 9);
  EXPECT_TRUE(contains(coverage_error(pieces, whole_tensor(cube), "chunk"), "no chunk holds elements")) << coverage_error(pieces, whole_tensor(cube));
}
