// Data parallelism's placements, without communication: for every rank of a ZeRO group of 3, the
// pieces the layout gives it of each parameter and of its optimizer state are exactly the elements
// its local tensors hold at the offsets it names, and the pieces the ranks write cover every tensor
// once. Each bucket of several parameters is cut in three where its size says, so a rank's share of
// a parameter is a flat range that starts and ends anywhere in it. The parameters parallel.modules
// keeps whole are whole on every rank, with their state, and say Replicate over dp_shard.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <map>

#include "parallel/ddp/grad_bucket.h"
#include "parallel/zero/bucket_shards.h"
#include "support/piece_of.h"
#include "train/training_state.h"

using namespace dtrain;

namespace {

// A rank's shard of the flat buffer, as ZeRO lays it out: its piece of each bucket end to end.
at::Tensor shard_of(const at::Tensor& flat, const BucketShards& shards) {
  at::Tensor shard = torch::zeros({shards.shard_numel()});
  for (const ShardPiece& p : shards.pieces()) shard.narrow(0, p.shard_offset, p.local).copy_(flat.narrow(0, p.begin, p.local));
  return shard;
}

}  // namespace

TEST(CheckpointLayout, EachRankHoldsAndWritesItsZeroPiecesAndTogetherTheyCoverEveryTensorOnce) {
  at::NoGradGuard no_grad;
  const TransformerConfig config = model_preset("tiny");
  Transformer model(config, 1);
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (auto& item : model->named_parameters()) {
    if (item.key() == "blocks.0.ln1.weight") item.value().requires_grad_(false);
    named.emplace_back(item.key(), item.value());
  }
  FlatParameters flat(named);
  flat.data().copy_(torch::arange(0, flat.numel(), torch::kFloat));  // every element its own value
  std::map<std::string, at::Tensor> global;
  for (auto& item : model->named_parameters()) global[item.key()] = item.value().detach();
  const KeptWhole second_block = [](const std::string& name) { return name.rfind("blocks.1.", 0) == 0; };
  for (const KeptWhole& kept_whole : {KeptWhole(), second_block})
  for (const int stage : {0, 1, 3}) {
    SCOPED_TRACE("ZeRO stage " + std::to_string(stage) + (kept_whole ? ", blocks.1.* kept whole" : ""));
    // Buckets of about 1000 elements, the parameters kept whole in buckets of their own.
    const std::vector<GradBucket> buckets = make_grad_buckets(flat.entries(), 4, 4000, stage > 0 ? kept_whole : nullptr);
    std::map<std::string, std::vector<LocalPiece>> written, written_state;
    for (int rank = 0; rank < 3; ++rank) {
      const BucketShards shards(buckets, 3, rank);
      const at::Tensor shard = shard_of(flat.data(), shards);
      const std::vector<MeshCoordinate> coords = {{"dp_replicate", 0, 1}, {"dp_shard", rank, 3}};
      const TrainingLayout layout = data_parallel_layout(config, model, flat, stage == 3 ? shard : flat.data(), shards, stage, coords, {},
                                                         nullptr, stage > 0 ? kept_whole : nullptr);
      // The optimizer state lies as the parameters do: the whole buffer's layout, or the shard's from stage 1.
      const at::Tensor state = stage >= 1 ? shard : flat.data();
      ASSERT_EQ(layout.parameters.size(), global.size());
      for (const HeldParameter& p : layout.parameters) {
        const at::Tensor& whole = global.at(p.spec.name);
        EXPECT_EQ(p.spec.shape, whole.sizes().vec()) << p.spec.name;
        EXPECT_EQ(p.trained, p.spec.name != "blocks.0.ln1.weight") << p.spec.name;
        for (const PlacedPiece& piece : p.pieces)
          EXPECT_TRUE(torch::equal(p.local.narrow(0, piece.local_offset, numel(piece.piece)), test::piece_of(whole, piece.piece)))
              << p.spec.name << " " << describe(piece.piece) << " on rank " << rank;
        for (const PlacedPiece& piece : p.state_pieces)
          EXPECT_TRUE(torch::equal(state.narrow(0, piece.local_offset, numel(piece.piece)), test::piece_of(whole, piece.piece)))
              << p.spec.name << " state " << describe(piece.piece) << " on rank " << rank;
        auto held = [](const std::vector<PlacedPiece>& pieces) {
          std::vector<LocalPiece> out;
          for (const auto& piece : pieces) out.push_back(piece.piece);
          return out;
        };
        if (writes_piece(p.spec, coords))
          for (const LocalPiece& piece : held(p.pieces)) written[p.spec.name].push_back(piece);
        if (p.trained && writes_piece({p.spec.name, p.spec.shape, at::kFloat, p.state_placements}, coords))
          for (const LocalPiece& piece : held(p.state_pieces)) written_state[p.spec.name].push_back(piece);
        // A second replica (hybrid sharding) writes none of it.
        EXPECT_FALSE(writes_piece(p.spec, {{"dp_replicate", 1, 2}, {"dp_shard", rank, 3}})) << p.spec.name;
        if (stage > 0 && kept_whole && kept_whole(p.spec.name)) {
          for (const auto* placements : {&p.spec.placements, &p.state_placements})
            for (const auto& [dim, placement] : *placements) EXPECT_EQ(placement.kind, Placement::Kind::Replicate) << p.spec.name << " over " << dim;
          ASSERT_EQ(p.state_pieces.size(), 1u) << p.spec.name;
          EXPECT_TRUE(is_whole_box(p.state_pieces.front().piece) && p.state_pieces.front().piece.box.size == p.spec.shape) << p.spec.name;
        }
      }
    }
    for (const auto& [name, whole] : global) {
      EXPECT_EQ(coverage_error(written[name], whole_tensor(whole.sizes().vec())), "") << name;
      if (name != "blocks.0.ln1.weight") {
        EXPECT_EQ(coverage_error(written_state[name], whole_tensor(whole.sizes().vec())), "") << name;
      }
    }
  }
}
