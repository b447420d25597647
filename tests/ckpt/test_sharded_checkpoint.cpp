// Sharded checkpoints: chunks written by several "ranks" under one layout (flat ranges, boxes, flat
// ranges of boxes) read back under another, a version-1 index (flat ranges only) read as before, and
// an index that misses or doubles elements, or disagrees with the shard files, refused by name.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ckpt/durable_file.h"
#include "ckpt/safetensors.h"
#include "ckpt/sharded_checkpoint.h"
#include "support/piece_of.h"
#include "support/scratch.h"

using namespace dtrain;
using dtrain::test::scratch_dir;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// `weight` (5 x 7) cut into the flat ranges of `cuts` (one rank each, as ZeRO cuts it), a bf16 bias
// held whole by rank 0 and a scalar step count.
const at::Tensor kWeight = torch::arange(0, 35, torch::kFloat).reshape({5, 7});
const at::Tensor kBias = torch::linspace(-1, 1, 6).to(torch::kBFloat16);

std::map<std::string, GlobalTensor> globals() {
  return {{"weight", {{5, 7}, at::kFloat, {}}}, {"bias", {{6}, at::kBFloat16, {}}}, {"step", {{}, at::kLong, {}}}};
}

std::string write_checkpoint(const std::string& name, const std::vector<std::pair<int64_t, int64_t>>& cuts) {
  const std::string dir = scratch_dir(name);
  for (size_t r = 0; r < cuts.size(); ++r) {
    const auto [first, n] = cuts[r];
    std::vector<TensorChunk> chunks = {{"weight", narrow(whole_tensor({5, 7}), first, first + n), kWeight.view({-1}).narrow(0, first, n)}};
    if (r == 0) {
      chunks.push_back({"bias", whole_tensor({6}), kBias});
      chunks.push_back({"step", whole_tensor({}), torch::tensor(int64_t(12))});
    }
    write_shard_file(dir, int(r), chunks);
  }
  write_checkpoint_index(dir, globals(), {{"note", "test"}});
  return dir;
}

// What `f` throws; "no error" when it returns.
std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(ShardedCheckpoint, AnyRangeReadsBackWhateverCutWroteIt) {
  const std::string dir = write_checkpoint("sharded_rt", {{0, 12}, {12, 12}, {24, 11}});
  ShardedCheckpointReader ckpt(dir);
  EXPECT_EQ(ckpt.metadata()["note"], "test");
  EXPECT_EQ(ckpt.tensors().size(), 3u);
  EXPECT_TRUE(torch::equal(ckpt.read("weight"), kWeight));
  EXPECT_TRUE(torch::equal(ckpt.read("bias"), kBias));
  EXPECT_EQ(ckpt.read("step").item<int64_t>(), 12);
  EXPECT_EQ(ckpt.read("step").dim(), 0);
  // Every range a reader with another number of ranks could ask for, across chunk boundaries.
  for (int64_t from = 0; from < 35; ++from)
    for (int64_t n = 1; from + n <= 35; n += 3) {
      at::Tensor out = torch::full({n}, -1.0);
      ckpt.read("weight", from, out);
      EXPECT_TRUE(torch::equal(out, kWeight.view({-1}).narrow(0, from, n))) << from << "+" << n;
    }
  EXPECT_THROW(ckpt.read("weight", 30, torch::empty({6})), std::runtime_error);
  EXPECT_THROW(ckpt.read("nothing"), std::runtime_error);
}

TEST(ShardedCheckpoint, AnIndexIsRefusedUnlessEveryElementIsHeldExactlyOnce) {
  const std::string gap = error_message([] { write_checkpoint("sharded_gap", {{0, 12}, {13, 22}}); });
  EXPECT_TRUE(contains(gap, "tensor 'weight': no chunk holds elements 12..12")) << gap;
  const std::string twice = error_message([] { write_checkpoint("sharded_twice", {{0, 13}, {12, 23}}); });
  EXPECT_TRUE(contains(twice, "tensor 'weight': elements from 12 are held by two chunks")) << twice;

  // An index edited afterwards fails when opened, naming the tensor.
  const std::string dir = write_checkpoint("sharded_edited", {{0, 20}, {20, 15}});
  nlohmann::json index = nlohmann::json::parse(read_text_file(dir + "/index.json"));
  ASSERT_EQ(index["tensors"]["weight"]["chunks"][1]["flat_range"], nlohmann::json({20, 35}));
  index["tensors"]["weight"]["chunks"][1]["flat_range"][0] = 21;
  write_file_atomically(dir + "/index.json", index.dump(1));
  const std::string edited = error_message([&] { ShardedCheckpointReader{dir}; });
  EXPECT_TRUE(contains(edited, "index.json' has a malformed entry for 'weight': no chunk holds elements 20..20")) << edited;
  const std::string missing = error_message([] { ShardedCheckpointReader{scratch_dir("sharded_none")}; });
  EXPECT_TRUE(contains(missing, "index.json' is missing")) << missing;
}

// A shard cut short after the index was written (a checkpoint whose manifest was rewritten to match):
// opening the checkpoint names the file and the chunk, which checking the index against the shard
// headers reads, rather than a read returning short data.
TEST(ShardedCheckpoint, ATruncatedShardIsNamedWhenOpened) {
  const std::string dir = write_checkpoint("sharded_truncated", {{0, 20}, {20, 15}});
  fs::resize_file(dir + "/shard-00001.safetensors", fs::file_size(dir + "/shard-00001.safetensors") - 8);
  const std::string error = error_message([&] { ShardedCheckpointReader{dir}; });
  EXPECT_TRUE(contains(error, "shard-00001.safetensors': tensor 'weight@[0:5,0:7][20:35]'")) << error;
}

// index.json says where each chunk's bytes lie, and readers used to trust it: with one chunk's
// byte range moved by an element, or two same-shaped tensors' offsets swapped (and the manifest
// entry rewritten to match), a checkpoint loaded other bytes as the tensor without a word. Opening it
// now compares every chunk with its shard's header and names the tensor that disagrees.
TEST(ShardedCheckpoint, AnIndexWhoseByteOffsetsDisagreeWithTheShardHeadersIsRefused) {
  const std::string dir = scratch_dir("sharded_offsets");
  const std::map<std::string, GlobalTensor> tensors = {{"a", {{8}, at::kFloat, {}}}, {"b", {{8}, at::kFloat, {}}}, {"c", {{8}, at::kFloat, {}}}};
  write_shard_file(dir, 0, {{"a", whole_tensor({8}), torch::arange(0, 8, torch::kFloat)}, {"b", whole_tensor({8}), torch::arange(8, 16, torch::kFloat)},
                            {"c", whole_tensor({8}), torch::arange(16, 24, torch::kFloat)}});
  write_checkpoint_index(dir, tensors, {});
  const nlohmann::json original = nlohmann::json::parse(read_text_file(dir + "/index.json"));
  EXPECT_TRUE(torch::equal(ShardedCheckpointReader(dir).read("b"), torch::arange(8, 16, torch::kFloat)));
  auto open_edited = [&](const std::function<void(nlohmann::json& index)>& edit) {
    nlohmann::json index = original;
    edit(index);
    write_file_atomically(dir + "/index.json", index.dump(1));
    return error_message([&] { ShardedCheckpointReader{dir}; });
  };
  auto byte_range = [](nlohmann::json& index, const std::string& tensor) -> nlohmann::json& {
    return index["tensors"][tensor]["chunks"][0]["byte_range"];
  };
  const uint64_t b_at = original["tensors"]["b"]["chunks"][0]["byte_range"][0].get<uint64_t>();
  const std::string shifted = open_edited([&](nlohmann::json& index) { byte_range(index, "b") = {b_at + 4, b_at + 36}; });
  EXPECT_TRUE(contains(shifted, "index.json' disagrees with '" + dir + "/shard-00000.safetensors' about tensor 'b'")) << shifted;
  EXPECT_TRUE(contains(shifted, "the index says byte offset " + std::to_string(b_at + 4) + ", the file's header " + std::to_string(b_at)))
      << shifted;
  const std::string swapped = open_edited([&](nlohmann::json& index) { std::swap(byte_range(index, "a"), byte_range(index, "c")); });
  EXPECT_TRUE(contains(swapped, "about tensor 'a' (its chunk from element 0): the index says byte offset")) << swapped;
  const std::string retyped = open_edited([&](nlohmann::json& index) { index["tensors"]["c"]["dtype"] = "I32"; });
  EXPECT_TRUE(contains(retyped, "about tensor 'c' (its chunk from element 0): the index says Int, the file Float")) << retyped;
}

TEST(ShardedCheckpoint, AChunkOfAnUnknownTensorOrTypeIsNamed) {
  const std::string dir = scratch_dir("sharded_unknown");
  write_shard_file(dir, 0, {{"weight", whole_tensor({5, 7}), kWeight}, {"bias", whole_tensor({6}), kBias.to(at::kFloat)},
                            {"step", whole_tensor({}), torch::tensor(int64_t(1))}});
  try {
    write_checkpoint_index(dir, globals(), {});
    ADD_FAILURE() << "a float chunk of a bf16 tensor was indexed";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "shard-00000.safetensors: chunk 'bias@[0:6]' is Float, the tensor is BFloat16")) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir + "/index.json"));
}

namespace {

ParamSpec weight_spec(std::vector<std::pair<std::string, Placement>> placements) {
  return {"weight", {6, 8}, at::kFloat, std::move(placements)};
}

// A 6 x 8 weight saved as tensor parallelism over 2 ranks on dim 1 (row-parallel), each slice cut by
// ZeRO over 3 ranks into flat ranges: six chunks that are flat ranges of dim-1 slices.
const at::Tensor kGrid = torch::arange(0, 48, torch::kFloat).reshape({6, 8});

std::string write_row_parallel_zero(const std::string& name) {
  const std::string dir = scratch_dir(name);
  const ParamSpec saved = weight_spec({{"tp", Placement::shard(1)}, {"dp_shard", Placement::flat_shard()}});
  for (int tp = 0; tp < 2; ++tp)
    for (int dp = 0; dp < 3; ++dp) {
      const LocalPiece piece = *local_piece(saved, {{"tp", tp, 2}, {"dp_shard", dp, 3}});
      write_shard_file(dir, tp * 3 + dp, {{"weight", piece, test::piece_of(kGrid, piece)}});
    }
  write_checkpoint_index(dir, {{"weight", {{6, 8}, at::kFloat, {{"tp", 2, Placement::shard(1)}, {"dp_shard", 3, Placement::flat_shard()}}}}}, {});
  return dir;
}

}  // namespace

// What the flat-only index could not describe: every piece of another layout (column-parallel, ZeRO
// over it, one rank) read back from flat ranges of row-parallel slices.
TEST(ShardedCheckpoint, FlatRangesOfDimOneSlicesReadBackUnderAnyOtherLayout) {
  const std::string dir = write_row_parallel_zero("sharded_boxes");
  ShardedCheckpointReader ckpt(dir);
  EXPECT_EQ(ckpt.version(), 2);
  EXPECT_TRUE(torch::equal(ckpt.read("weight"), kGrid));
  const nlohmann::json index = nlohmann::json::parse(read_text_file(dir + "/index.json"));
  EXPECT_EQ(index["version"], 2);
  const nlohmann::json& first = index["tensors"]["weight"]["chunks"][0];
  EXPECT_EQ(first["offset"], nlohmann::json({0, 0}));
  EXPECT_EQ(first["size"], nlohmann::json({6, 4}));
  EXPECT_EQ(first["flat_range"], nlohmann::json({0, 8}));
  // How the layout cut it, for a person reading the index: sharded on dim 1 over tp, then flat over dp_shard.
  EXPECT_EQ(index["tensors"]["weight"]["placements"], nlohmann::json::parse(R"([{"mesh_dim": "tp", "ranks": 2, "placement": "shard", "dim": 1},
                                                                                {"mesh_dim": "dp_shard", "ranks": 3, "placement": "flat_shard"}])"));
  const std::vector<SavedPlacement>& placements = ckpt.tensor("weight").placements;
  ASSERT_EQ(placements.size(), 2u);
  EXPECT_EQ(placements[0].mesh_dim, "tp");
  EXPECT_EQ(placements[0].ranks, 2);
  EXPECT_EQ(placements[0].placement.kind, Placement::Kind::Shard);
  EXPECT_EQ(placements[0].placement.dim, 1);
  EXPECT_EQ(placements[1].placement.kind, Placement::Kind::FlatShard);
  for (const ParamSpec& spec : {weight_spec({{"tp", Placement::shard(0)}, {"dp_shard", Placement::flat_shard()}}),
                                weight_spec({{"tp", Placement::shard(1)}, {"dp_shard", Placement::flat_shard()}}),
                                weight_spec({{"dp_shard", Placement::flat_shard()}}), weight_spec({{"tp", Placement::shard(0)}})})
    for (int tp = 0; tp < 2; ++tp)
      for (int dp = 0; dp < 5; ++dp) {
        const LocalPiece piece = *local_piece(spec, {{"tp", tp, 2}, {"dp_shard", dp, 5}});
        at::Tensor out = torch::full({numel(piece)}, -1.0);
        ckpt.read("weight", piece, out);
        EXPECT_TRUE(torch::equal(out, test::piece_of(kGrid, piece))) << describe(piece);
      }
  const std::string outside = error_message([&] { ckpt.read("weight", {{{4, 0}, {4, 8}}}, torch::empty({32})); });
  EXPECT_TRUE(contains(outside, "the piece [4:8, 0:8] asked of 'weight' does not lie inside the tensor's shape [6, 8]")) << outside;
}

// An index of the dtrain before tensor parallelism has no placements and reads as before; a
// placement that is not one (edited, with its checksum rewritten) is refused by name like any other
// malformed entry.
TEST(ShardedCheckpoint, PlacementsMayBeAbsentAndAMalformedOneIsNamed) {
  const std::string dir = write_row_parallel_zero("sharded_placements");
  const nlohmann::json original = nlohmann::json::parse(read_text_file(dir + "/index.json"));
  auto open_edited = [&](const nlohmann::json& placements) {
    nlohmann::json index = original;
    if (placements.is_null()) index["tensors"]["weight"].erase("placements");
    else index["tensors"]["weight"]["placements"] = placements;
    write_file_atomically(dir + "/index.json", index.dump(1));
    return error_message([&] { ShardedCheckpointReader ckpt(dir); EXPECT_TRUE(torch::equal(ckpt.read("weight"), kGrid)); });
  };
  EXPECT_EQ(open_edited(nullptr), "no error");
  EXPECT_TRUE(ShardedCheckpointReader(dir).tensor("weight").placements.empty());
  const std::string beyond = open_edited(nlohmann::json::parse(R"([{"mesh_dim": "tp", "ranks": 2, "placement": "shard", "dim": 2}])"));
  EXPECT_TRUE(contains(beyond, "index.json' has a malformed entry for 'weight': placement")) << beyond;
  EXPECT_TRUE(contains(beyond, "needs the dim it shards, one of the tensor's 2")) << beyond;
  const std::string unknown = open_edited(nlohmann::json::parse(R"([{"mesh_dim": "tp", "ranks": 2, "placement": "stripe"}])"));
  EXPECT_TRUE(contains(unknown, "is none of replicate, shard, flat_shard, stages")) << unknown;
  const std::string no_stages = open_edited(nlohmann::json::parse(R"([{"mesh_dim": "pp", "ranks": 2, "placement": "stages"}])"));
  EXPECT_TRUE(contains(no_stages, "needs the stages that hold the tensor")) << no_stages;
}

// A read goes to the chunks that overlap its piece alone: with the files of the other chunks gone
// after the index was opened, a piece they do not hold still reads, and one they do names the file.
TEST(ShardedCheckpoint, AReadOpensOnlyTheChunksThatOverlapItsPiece) {
  const std::string dir = write_row_parallel_zero("sharded_lookup");
  ShardedCheckpointReader ckpt(dir);
  for (int rank = 1; rank < 6; ++rank) fs::remove(dir + "/" + shard_file_name(rank));
  const LocalPiece held = narrow({{{0, 0}, {6, 4}}}, 2, 7);  // inside rank 0's chunk: elements 0..7 of the left slice
  at::Tensor out = torch::empty({5});
  ckpt.read("weight", held, out);
  EXPECT_TRUE(torch::equal(out, test::piece_of(kGrid, held)));
  const std::string error = error_message([&] { ckpt.read("weight", {{{0, 3}, {1, 2}}}, torch::empty({2})); });
  EXPECT_TRUE(contains(error, "shard-00003.safetensors' cannot be opened")) << error;
}

// A checkpoint written before boxes: index.json at version 1, each chunk a flat range of the whole
// flattened tensor named tensor@offset with one dim. Written here as that dtrain wrote it; it reads
// back whole, by flat range and by box, and its checks against the shard headers still hold.
TEST(ShardedCheckpoint, AVersionOneIndexOfFlatRangesStillReads) {
  const std::string dir = scratch_dir("sharded_v1");
  const std::vector<std::pair<int64_t, int64_t>> cuts = {{0, 12}, {12, 12}, {24, 11}};
  nlohmann::json weight_chunks = nlohmann::json::array();
  uint64_t step_at = 0;
  for (size_t r = 0; r < cuts.size(); ++r) {
    const auto [first, n] = cuts[r];
    NamedTensors named = {{"weight@" + std::to_string(first), kWeight.view({-1}).narrow(0, first, n)}};
    if (r == 0) named.push_back({"step@0", torch::tensor({int64_t(12)})});
    const std::string file = shard_file_name(int(r));
    write_safetensors(dir + "/" + file, named);
    for (const auto& e : read_safetensors_header(dir + "/" + file)) {
      if (e.name == "step@0") step_at = e.begin;
      else weight_chunks.push_back({{"file", file}, {"offset", first}, {"numel", n}, {"byte_offset", e.begin}});
    }
  }
  const nlohmann::json v1 = {
      {"format", "dtrain sharded checkpoint"},
      {"version", 1},
      {"metadata", {{"note", "v1"}}},
      {"tensors",
       {{"weight", {{"dtype", "F32"}, {"shape", {5, 7}}, {"chunks", weight_chunks}}},
        {"step", {{"dtype", "I64"}, {"shape", nlohmann::json::array()}, {"chunks", {{{"file", shard_file_name(0)}, {"offset", 0}, {"numel", 1}, {"byte_offset", step_at}}}}}}}}};
  write_file_atomically(dir + "/index.json", v1.dump(1));
  {
    ShardedCheckpointReader ckpt(dir);
    EXPECT_EQ(ckpt.version(), 1);
    EXPECT_EQ(ckpt.metadata()["note"], "v1");
    EXPECT_TRUE(torch::equal(ckpt.read("weight"), kWeight));
    EXPECT_EQ(ckpt.read("step").item<int64_t>(), 12);
    at::Tensor range = torch::empty({9});
    ckpt.read("weight", 10, range);
    EXPECT_TRUE(torch::equal(range, kWeight.view({-1}).narrow(0, 10, 9)));
    const LocalPiece column = narrow({{{0, 3}, {5, 2}}}, 1, 9);  // a dim-1 slice's flat range, across all three chunks
    at::Tensor out = torch::empty({8});
    ckpt.read("weight", column, out);
    EXPECT_TRUE(torch::equal(out, test::piece_of(kWeight, column)));
  }
  auto open_edited = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json index = v1;
    edit(index);
    write_file_atomically(dir + "/index.json", index.dump(1));
    return error_message([&] { ShardedCheckpointReader{dir}; });
  };
  const std::string gap = open_edited([](nlohmann::json& index) { index["tensors"]["weight"]["chunks"][1]["offset"] = 13; });
  EXPECT_TRUE(contains(gap, "index.json' has a malformed entry for 'weight': no chunk holds elements 12..12")) << gap;
  const std::string shifted = open_edited([](nlohmann::json& index) {
    index["tensors"]["weight"]["chunks"][1]["byte_offset"] = index["tensors"]["weight"]["chunks"][1]["byte_offset"].get<uint64_t>() + 4;
  });
  EXPECT_TRUE(contains(shifted, "about tensor 'weight' (its chunk from element 12): the index says byte offset")) << shifted;
  const std::string newer = open_edited([](nlohmann::json& index) { index["version"] = 3; });
  EXPECT_TRUE(contains(newer, "index.json' has version 3; this dtrain reads versions 1 and 2")) << newer;
}

// A version-2 shard's chunk names state their piece; one that states none, or a piece outside its
// tensor, is refused by name before any index is written.
TEST(ShardedCheckpoint, AChunkNameThatStatesNoPieceOfItsTensorIsRefused) {
  const std::map<std::string, GlobalTensor> tensors = {{"weight", {{5, 7}, at::kFloat, {}}}};
  for (const auto& [key, needle] : std::vector<std::pair<std::string, std::string>>{
           {"weight@0", "chunk 'weight@0' is not named tensor@[box] or tensor@[box][flat range]"},
           {"weight@[0:5,3:8]", "chunk 'weight@[0:5,3:8]' does not lie inside the tensor's shape [5, 7]"},
           {"weight@[0:5,0:7][30:40]", "chunk 'weight@[0:5,0:7][30:40]' has a flat range outside its box's 35 elements"},
           {"weight@[0:5,0:5]", "chunk 'weight@[0:5,0:5]' has shape [7] where its piece needs [5, 5]"}}) {
    const std::string dir = scratch_dir("sharded_names");
    write_safetensors(dir + "/" + shard_file_name(0), {{key, torch::zeros({7})}});
    const std::string error = error_message([&] { write_checkpoint_index(dir, tensors, {}); });
    EXPECT_TRUE(contains(error, needle)) << error;
    EXPECT_FALSE(fs::exists(dir + "/index.json"));
  }
}
