// A rank of the multi-rank comm tests, started by `dtrain launch`. Each scenario checks its results
// against closed forms computed locally and exits non-zero with a message on any difference.
//   worker_collectives SCENARIO [TIMEOUT_MS [BACKEND [SHM_CHUNK_BYTES]]]
//   SCENARIO: collectives | sweep | mesh | parallel_mesh | mappings | skip | skip_dp_cp | mismatch | killed
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <thread>

#include "comm/collectives.h"
#include "comm/device_mesh.h"
#include "comm/mappings.h"
#include "comm/world.h"

using namespace dtrain;

namespace {

int failures = 0;

void expect_equal(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  if (!got.sizes().equals(want.sizes()) || !at::equal(got, want.to(got.scalar_type()))) {
    ++failures;
    std::cerr << "MISMATCH " << what << ": got " << got.flatten().slice(0, 0, 8) << " want "
              << want.flatten().slice(0, 0, 8) << "\n";
  }
}

// Every collective, sync and async, on odd sizes and several dtypes. Values are small integers,
// exact in every dtype, so results must match bit for bit.
void collectives(World& world) {
  Group& g = *world.world_group();
  const int n = g.size(), r = g.rank();
  for (auto dtype : {at::kFloat, at::kDouble, at::kInt, at::kLong}) {
    const std::string dt = c10::toString(dtype);
    for (int64_t len : {1, 7, 1001}) {
      auto opts = at::TensorOptions().dtype(dtype);
      const std::string tag = dt + " x" + std::to_string(len);
      at::Tensor i = at::arange(len, opts);
      at::Tensor t = i * (r + 1);  // rank r holds (r+1)*i
      all_reduce(g, t, ReduceOp::Sum, "sum");
      expect_equal(t, i * (n * (n + 1) / 2), "all_reduce sum " + tag);

      t = i + r;
      all_reduce(g, t, ReduceOp::Max);
      expect_equal(t, i + (n - 1), "all_reduce max " + tag);
      t = i + r;
      all_reduce(g, t, ReduceOp::Min);
      expect_equal(t, i, "all_reduce min " + tag);
      if (at::isFloatingType(dtype)) {
        t = i * (r + 1);
        all_reduce(g, t, ReduceOp::Avg);
        expect_equal(t, i * ((n + 1) / 2.0), "all_reduce avg " + tag);
      }
      t = i * (r + 1);
      all_reduce_async(g, t, ReduceOp::Sum, "async").wait();
      expect_equal(t, i * (n * (n + 1) / 2), "all_reduce_async " + tag);

      at::Tensor gathered = all_gather(g, i + 100 * r);
      expect_equal(gathered, at::cat([&] {
                     std::vector<at::Tensor> parts;
                     for (int k = 0; k < n; ++k) parts.push_back(i + 100 * k);
                     return parts;
                   }()),
                   "all_gather " + tag);

      // reduce_scatter: rank r holds (r+1)*j over n*len elements; chunk c sums to n(n+1)/2 * j.
      at::Tensor full = at::arange(n * len, opts);
      at::Tensor rs = reduce_scatter(g, full * (r + 1), ReduceOp::Sum);
      expect_equal(rs, full.slice(0, r * len, (r + 1) * len) * (n * (n + 1) / 2), "reduce_scatter " + tag);
      at::Tensor rs_max = at::empty({len}, opts);
      reduce_scatter_async(g, full + r, rs_max, ReduceOp::Max).wait();
      expect_equal(rs_max, full.slice(0, r * len, (r + 1) * len) + (n - 1), "reduce_scatter_async max " + tag);

      for (int root = 0; root < n; ++root) {
        at::Tensor b = r == root ? i + 7 * root : at::zeros_like(i);
        broadcast(g, b, root);
        expect_equal(b, i + 7 * root, "broadcast root " + std::to_string(root) + " " + tag);
      }

      // all_to_all: rank r sends chunk j = 1000*r + 10*j + i to rank j.
      std::vector<at::Tensor> chunks;
      for (int j = 0; j < n; ++j) chunks.push_back(i + 1000 * r + 10 * j);
      at::Tensor a2a = all_to_all(g, at::cat(chunks));
      std::vector<at::Tensor> expected;
      for (int src = 0; src < n; ++src) expected.push_back(i + 1000 * src + 10 * r);
      expect_equal(a2a, at::cat(expected), "all_to_all " + tag);
    }
  }
  // Point to point: a ring, even ranks sending first.
  at::Tensor out = at::full({5}, r, at::kFloat), in = at::empty({5});
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  auto s = send_async(g, out, next);
  recv(g, in, prev);
  s.wait();
  expect_equal(in, at::full({5}, prev, at::kFloat), "send/recv ring");
  barrier(g, "end");
}

at::Tensor cat_ranks(int n, const std::function<at::Tensor(int)>& part) {
  std::vector<at::Tensor> parts;
  for (int k = 0; k < n; ++k) parts.push_back(part(k));
  return at::cat(parts);
}

// Every collective x dtype x reduction on one group, for sizes from empty to many buffer steps.
// Values are small integers (at most 40 after a sum of four ranks), exact in every dtype down to int8.
void sweep_group(Group& g, const std::string& where) {
  const int n = g.size(), r = g.rank();
  const int64_t sum_weights = n * (n + 1) / 2;
  for (auto dtype : {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf, at::kInt, at::kLong, at::kChar, at::kByte}) {
    for (int64_t len : {0, 1, 7, 1001, 5003}) {
      auto opts = at::TensorOptions().dtype(dtype);
      const std::string tag = where + " " + c10::toString(dtype) + " x" + std::to_string(len);
      const at::Tensor base = at::arange(len, at::kLong).remainder(5).to(dtype);  // 0..4
      at::Tensor t = base * (r + 1);
      all_reduce(g, t, ReduceOp::Sum);
      expect_equal(t, base * sum_weights, "all_reduce sum " + tag);
      t = base + r;
      all_reduce_async(g, t, ReduceOp::Max).wait();
      expect_equal(t, base + (n - 1), "all_reduce max " + tag);
      t = base + r;
      all_reduce(g, t, ReduceOp::Min);
      expect_equal(t, base, "all_reduce min " + tag);
      if (at::isFloatingType(dtype)) {
        t = base * 2 * (r + 1);
        all_reduce(g, t, ReduceOp::Avg);
        expect_equal(t, base * (n + 1), "all_reduce avg " + tag);
      }
      expect_equal(all_gather(g, base + 5 * r), cat_ranks(n, [&](int k) { return base + 5 * k; }), "all_gather " + tag);

      const at::Tensor full = at::arange(n * len, at::kLong).remainder(5).to(dtype);
      at::Tensor rs = reduce_scatter(g, full * (r + 1), ReduceOp::Sum);
      expect_equal(rs, full.slice(0, r * len, (r + 1) * len) * sum_weights, "reduce_scatter sum " + tag);
      at::Tensor rs_out = at::empty({len}, opts);
      reduce_scatter_async(g, full + r, rs_out, ReduceOp::Max).wait();
      expect_equal(rs_out, full.slice(0, r * len, (r + 1) * len) + (n - 1), "reduce_scatter max " + tag);
      reduce_scatter(g, full + r, rs_out, ReduceOp::Min);
      expect_equal(rs_out, full.slice(0, r * len, (r + 1) * len), "reduce_scatter min " + tag);
      if (at::isFloatingType(dtype)) {
        reduce_scatter(g, full * 2 * (r + 1), rs_out, ReduceOp::Avg);
        expect_equal(rs_out, full.slice(0, r * len, (r + 1) * len) * (n + 1), "reduce_scatter avg " + tag);
      }
      const int root = n - 1;
      at::Tensor b = r == root ? base + 3 : at::zeros_like(base);
      broadcast_async(g, b, root).wait();
      expect_equal(b, base + 3, "broadcast " + tag);

      at::Tensor a2a = all_to_all(g, cat_ranks(n, [&](int j) { return base + 10 * r + 2 * j; }).to(dtype));
      expect_equal(a2a, cat_ranks(n, [&](int src) { return base + 10 * src + 2 * r; }), "all_to_all " + tag);
    }
  }
  // Messages of several channel buffers each way at once, around a ring.
  for (int64_t len : {0, 5, 300000}) {
    if (n == 1) break;
    at::Tensor out = at::arange(len, at::kFloat) + r, in = at::empty({len});
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    auto s = send_async(g, out, next);
    recv(g, in, prev);
    s.wait();
    expect_equal(in, at::arange(len, at::kFloat) + prev, where + " send/recv ring x" + std::to_string(len));
  }
  barrier(g, "sweep end");
}

// The world, a group of every other rank, the world in reverse order (group rank 0 is the last
// rank, so group order and node order differ) and, from 3 ranks, a group without rank 0. Each group
// names its backend, for the tests of backend selection.
void sweep(World& world) {
  std::vector<int> all, even, reversed, rest;
  for (int r = 0; r < world.size(); ++r) {
    all.push_back(r);
    if (r % 2 == 0) even.push_back(r);
    reversed.insert(reversed.begin(), r);
    if (r > 0) rest.push_back(r);
  }
  std::vector<std::pair<std::string, std::vector<int>>> groups{{"even", even}, {"reversed", reversed}};
  if (world.size() >= 3) groups.emplace_back("rest", rest);
  auto run = [&](Group& g) {
    std::cout << "group " << g.name() << " backend " << g.backend_name() << std::endl;
    sweep_group(g, g.name());
  };
  run(*world.world_group());
  for (const auto& [name, ranks] : groups)
    if (auto g = world.new_group(name, ranks)) run(*g);
}

// The last rank dies by SIGKILL while its worker thread is inside a large all-reduce; the others
// must fail with an error naming it.
void killed(World& world) {
  Group& g = *world.world_group();
  at::Tensor t = at::ones({64 << 20 >> 2});
  barrier(g, "start");
  if (world.rank() == world.size() - 1) {
    auto h = all_reduce_async(g, t, ReduceOp::Sum, "big");
    ::raise(SIGKILL);
  }
  all_reduce(g, t, ReduceOp::Sum, "big");
}

// On a 2x2 mesh {dp: 2, tp: 2}: tp groups are {0,1},{2,3}; dp groups are {0,2},{1,3}.
void mesh(World& world) {
  DeviceMesh m(world, {{"dp", -1}, {"tp", 2}});
  const int r = world.rank();
  at::Tensor t = at::full({3}, 1 << r, at::kLong);  // one bit per rank: the sum names the members
  all_reduce(*m.group("tp"), t);
  const int64_t tp_bits = r < 2 ? 0b0011 : 0b1100;
  expect_equal(t, at::full({3}, tp_bits, at::kLong), "tp group sum");
  t = at::full({3}, 1 << r, at::kLong);
  all_reduce(*m.group("dp"), t);
  const int64_t dp_bits = r % 2 == 0 ? 0b0101 : 0b1010;
  expect_equal(t, at::full({3}, dp_bits, at::kLong), "dp group sum");
  if (m.coord("tp") != r % 2 || m.coord("dp") != r / 2 || m.size("dp") != 2) {
    ++failures;
    std::cerr << "MISMATCH mesh coordinates on rank " << r << "\n";
  }
}

void expect_true(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::cerr << "MISMATCH " << what << "\n";
  }
}

// On 8 ranks, the mesh of parallel dims pp 1 x dp_replicate 2 x dp_shard 2 x cp 2 x tp 1: every dim's
// group and every flattened group reduces exactly the ranks that differ from this one only on the
// dims it spans, this rank's coordinate in it is its row-major position there, sub-meshes answer
// through the same groups, and rank_at inverts coordinates.
void parallel_mesh(World& world) {
  const std::vector<std::pair<std::string, int>> given{{"pp", 1}, {"dp_replicate", 2}, {"dp_shard", 2}, {"cp", 2}, {"tp", 1}};
  DeviceMesh m(world, given);
  const std::vector<MeshDim> dims = resolve_mesh_dims(given, world.size());
  const int r = world.rank();
  const std::vector<int> mine = mesh_coords(dims, r);
  const std::map<std::string, std::vector<size_t>> spans{{"pp", {0}}, {"dp_replicate", {1}}, {"dp_shard", {2}}, {"cp", {3}},
                                                         {"tp", {4}}, {"dp", {1, 2}}, {"dp_cp", {1, 2, 3}}, {"dp_shard_cp", {2, 3}}};
  // The ranks that differ from `rank` only on the dims `over`, in increasing order (row-major).
  auto members_of = [&](int rank, const std::vector<size_t>& over) {
    const std::vector<int> at = mesh_coords(dims, rank);
    std::vector<int> members;
    for (int other = 0; other < world.size(); ++other) {
      const std::vector<int> theirs = mesh_coords(dims, other);
      bool member = true;
      for (size_t d = 0; d < dims.size(); ++d)
        member = member && (theirs[d] == at[d] || std::find(over.begin(), over.end(), d) != over.end());
      if (member) members.push_back(other);
    }
    return members;
  };
  for (const auto& [name, over] : spans) {
    int64_t bits = 0;
    int size = 1, coord = 0;
    for (int member : members_of(r, over)) bits |= int64_t(1) << member;
    for (int other = 0; other < world.size(); ++other)
      expect_true(m.members(name, other) == members_of(other, over), name + " members of rank " + std::to_string(other));
    for (size_t d : over) {
      size *= dims[d].size;
      coord = coord * dims[d].size + mine[d];
    }
    at::Tensor t = at::full({3}, int64_t(1) << r, at::kLong);
    all_reduce(*m.group(name), t);
    expect_equal(t, at::full({3}, bits, at::kLong), name + " group sum");
    expect_true(m.size(name) == size && m.coord(name) == coord && m.group(name)->name() == name,
                name + " size, coordinate and name on rank " + std::to_string(r));
  }
  expect_true(m.rank_at(mine) == r, "rank_at of this rank's coordinates");
  const DeviceMesh dp = m.sub({"dp_replicate", "dp_shard"});
  expect_true(dp.group("dp_shard") == m.group("dp_shard") && dp.coord("dp_replicate") == mine[1] && dp.size("dp_shard") == 2,
              "sub-mesh answers through the mesh's groups");
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b) {
      std::vector<int> at_ab = mine;
      at_ab[1] = a;
      at_ab[2] = b;
      expect_true(dp.rank_at({a, b}) == mesh_rank(dims, at_ab), "sub-mesh rank_at keeps the other dims");
    }
  // A view of a flattened group: coordinate k on dp is replica k / 2, shard k % 2.
  const DeviceMesh dp_cp = m.sub({"dp", "cp"});
  expect_true(dp_cp.rank_at({3, 1}) == mesh_rank(dims, {0, 1, 1, 1, 0}), "rank_at through a flattened group");
  // dp_cp spans the world here: one communicator serves both. A size-1 dim has none.
  expect_true(&m.group("dp_cp")->backend() == &world.world_group()->backend(), "dp_cp shares the world's backend");
  expect_true(m.group("pp")->backend_name() == "none", "a size-1 dim has no backend");
}

// Rank r of n holds r+1 and its loss weighs the output by r+1, so that each mapping's forward value
// and input gradient have closed forms in r and n (tri = n(n+1)/2, the sum of the weights). Values
// are small integers: exact in double.
void check_mappings(const std::shared_ptr<Group>& g) {
  const int n = g->size(), r = g->rank();
  const double tri = n * (n + 1) / 2.0;
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const std::string where = " on group " + g->name() + " of " + std::to_string(n);
  auto leaf = [](at::Tensor t) { return t.requires_grad_(); };
  auto index = [&](int64_t size, int64_t dim, int64_t dims) {  // 0..size-1 along `dim`, broadcastable
    std::vector<int64_t> shape(dims, 1);
    shape[dim] = size;
    return at::arange(size, f64).view(shape);
  };
  {
    at::Tensor x = leaf(at::full({2, 3}, r + 1.0, f64));
    at::Tensor y = copy_to_group(x, g);
    expect_equal(y, at::full({2, 3}, r + 1.0, f64), "copy_to_group forward" + where);
    (y * (r + 1)).sum().backward();
    expect_equal(x.grad(), at::full({2, 3}, tri, f64), "copy_to_group backward" + where);
  }
  {
    at::Tensor x = leaf(at::full({2, 3}, r + 1.0, f64));
    at::Tensor y = reduce_from_group(x, g);
    expect_equal(y, at::full({2, 3}, tri, f64), "reduce_from_group forward" + where);
    expect_equal(x, at::full({2, 3}, r + 1.0, f64), "reduce_from_group leaves its input" + where);
    (y * (r + 1)).sum().backward();
    expect_equal(x.grad(), at::full({2, 3}, r + 1.0, f64), "reduce_from_group backward" + where);
  }
  {
    // [2, 3] -> [2, 3n]: column c came from rank c / 3. The loss weighs column c by c + 100 r.
    at::Tensor x = leaf(at::full({2, 3}, r + 1.0, f64));
    at::Tensor y = gather_from_group(x, g);
    const at::Tensor column = index(3 * n, 1, 2);
    expect_equal(y, (column / 3).floor().expand({2, 3 * n}) + 1, "gather_from_group forward" + where);
    (y * (column + 100 * r)).sum().backward();
    expect_equal(x.grad(), (index(3, 1, 2) + 3 * r + 100 * r).expand({2, 3}), "gather_from_group backward" + where);
  }
  {
    // [2, 3n], column c holding c on every rank -> this rank's columns 3r .. 3r+2.
    const at::Tensor column = index(3 * n, 1, 2);
    at::Tensor x = leaf(column.expand({2, 3 * n}).clone());
    at::Tensor y = scatter_to_group(x, g);
    expect_equal(y, (index(3, 1, 2) + 3 * r).expand({2, 3}), "scatter_to_group forward" + where);
    (y * (r + 1)).sum().backward();
    expect_equal(x.grad(), ((column / 3).floor() + 1).expand({2, 3 * n}), "scatter_to_group backward" + where);
  }
  {
    // [2, 2n, 3] holding (r+1)(s+1) at position s -> [2, 2, 3]: positions 2r, 2r+1, summed over ranks.
    const at::Tensor s = index(2 * n, 1, 3);
    at::Tensor x = leaf(((s + 1) * (r + 1)).expand({2, 2 * n, 3}).clone());
    at::Tensor y = reduce_scatter_to_sequence(x, g);
    expect_equal(y, (tri * (index(2, 1, 3) + 2 * r + 1)).expand({2, 2, 3}), "reduce_scatter_to_sequence forward" + where);
    (y * (r + 1)).sum().backward();
    expect_equal(x.grad(), ((s / 2).floor() + 1).expand({2, 2 * n, 3}), "reduce_scatter_to_sequence backward" + where);
  }
  for (int64_t dim : {1, 0}) {
    // [2, 2, 3] holding r+1 -> the sequence (dim) of 2n positions, s from rank s / 2. The loss weighs
    // position s by (r+1)(s+1), so position s' of this rank gets tri (2r + s' + 1) back.
    const std::string tag = "gather_from_sequence dim " + std::to_string(dim);
    at::Tensor x = leaf(at::full({2, 2, 3}, r + 1.0, f64));
    at::Tensor y = gather_from_sequence(x, g, dim);
    std::vector<int64_t> whole{2, 2, 3};
    whole[dim] = 2 * n;
    const at::Tensor s = index(2 * n, dim, 3);
    expect_equal(y, ((s / 2).floor() + 1).expand(whole), tag + " forward" + where);
    (y * (s + 1) * (r + 1)).sum().backward();
    expect_equal(x.grad(), (tri * (index(2, dim, 3) + 2 * r + 1)).expand({2, 2, 3}), tag + " backward" + where);
  }
}

// Every mapping over a group of one is its input itself: no collective, no autograd node.
void check_size_one_shortcut(const std::shared_ptr<Group>& g) {
  at::Tensor x = at::ones({2, 4}).requires_grad_();
  const std::vector<std::pair<std::string, at::Tensor>> results{
      {"copy_to_group", copy_to_group(x, g)},           {"reduce_from_group", reduce_from_group(x, g)},
      {"gather_from_group", gather_from_group(x, g)},   {"scatter_to_group", scatter_to_group(x, g)},
      {"reduce_scatter_to_sequence", reduce_scatter_to_sequence(x, g)},
      {"gather_from_sequence", gather_from_sequence(x, g)}};
  for (const auto& [name, y] : results) expect_true(y.is_same(x), name + " over a group of one returns its input");
}

// The mappings over the world and, on 4 ranks, over the tp groups of a dp_shard x tp mesh (whose
// group ranks are not the global ones); the size-1 shortcut over the mesh's cp dim.
void mappings(World& world) {
  DeviceMesh m(world, {{"dp_shard", -1}, {"cp", 1}, {"tp", 2}});
  check_mappings(world.world_group());
  if (world.size() > 2) check_mappings(m.group("tp"));
  check_size_one_shortcut(m.group("cp"));
}

// The last rank skips the second all-reduce on `g` and waits; the others must fail with a diagnosis.
void skip(World& world, Group& g) {
  at::Tensor t = at::ones({10});
  broadcast(g, t, 0, "first");
  if (world.rank() == world.size() - 1) {
    std::this_thread::sleep_for(std::chrono::seconds(30));
    return;
  }
  all_reduce(g, t, ReduceOp::Sum, "the skipped one");
}

// skip on a mesh's flattened group: its name must be in the diagnosis.
void skip_dp_cp(World& world) {
  DeviceMesh m(world, {{"dp_shard", 2}, {"cp", -1}});
  skip(world, *m.group("dp_cp"));
}

// Rank 1 calls a broadcast where everyone else calls an all-reduce.
void mismatch(World& world) {
  Group& g = *world.world_group();
  at::Tensor t = at::ones({1000});
  barrier(g, "start");
  if (world.rank() == 1) {
    at::Tensor small = at::ones({10});
    broadcast(g, small, 0, "wrong op");
  } else {
    all_reduce(g, t, ReduceOp::Sum, "right op");
  }
  std::this_thread::sleep_for(std::chrono::seconds(30));
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  const std::string scenario = argc > 1 ? argv[1] : "collectives";
  WorldOptions opts;
  if (argc > 2) opts.timeout = std::chrono::milliseconds(std::stoi(argv[2]));
  if (argc > 3) opts.backend = argv[3];
  if (argc > 4) opts.shm_chunk_bytes = std::stoll(argv[4]);
  try {
    auto world = World::init(opts, derive_worker_env(current_env()));
    if (scenario == "collectives") collectives(*world);
    else if (scenario == "sweep") sweep(*world);
    else if (scenario == "killed") killed(*world);
    else if (scenario == "mesh") mesh(*world);
    else if (scenario == "parallel_mesh") parallel_mesh(*world);
    else if (scenario == "mappings") mappings(*world);
    else if (scenario == "skip") skip(*world, *world->world_group());
    else if (scenario == "skip_dp_cp") skip_dp_cp(*world);
    else if (scenario == "mismatch") mismatch(*world);
    else throw std::invalid_argument("unknown scenario " + scenario);
  } catch (const std::exception& e) {
    std::cerr << "ERROR " << e.what() << "\n";
    return 1;
  }
  if (failures) return 1;
  std::cout << "PASS " << scenario << "\n";
  return 0;
}
