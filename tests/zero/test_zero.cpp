// ZeRO stages 1, 2 and 3: the shard layout, stage 3's prefetching, and checkpoints across stages
// (tests/train/test_feature_matrix.cpp trains each stage against one rank).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "model/transformer.h"
#include "parallel/zero/bucket_shards.h"
#include "parallel/zero/parameter_units.h"
#include "train/parameter_fingerprint.h"
#include "support/process.h"
#include "support/scratch.h"
#include "train/equivalence.h"

namespace dtrain::test {
namespace {

TEST(BucketShards, EveryRankOwnsAnEqualPaddedPieceOfEveryBucket) {
  for (const std::vector<int64_t>& sizes : {std::vector<int64_t>{1}, {7, 8, 9}, {100, 1, 1001, 64}})
    for (int ranks = 1; ranks <= 4; ++ranks) {
      std::vector<GradBucket> buckets;
      int64_t offset = 0;
      for (int64_t n : sizes) {
        buckets.push_back({offset, n, 0, 1});
        offset += n;
      }
      std::vector<int> owner(size_t(offset), -1);
      int64_t owned = 0;
      for (int r = 0; r < ranks; ++r) {
        const BucketShards s(buckets, ranks, r);
        ASSERT_EQ(s.pieces().size(), sizes.size());
        EXPECT_EQ(s.numel(), offset);
        int64_t shard_offset = 0;
        for (size_t b = 0; b < sizes.size(); ++b) {
          const ShardPiece& p = s.pieces()[b];
          EXPECT_EQ(p.padded_numel, p.piece * ranks);
          EXPECT_GE(p.padded_numel, sizes[b]);
          EXPECT_LT(p.padded_numel - sizes[b], ranks) << "bucket " << b << " over " << ranks;
          EXPECT_EQ(p.shard_offset, shard_offset);
          EXPECT_LE(p.local, p.piece);
          shard_offset += p.piece;
          for (int64_t i = p.begin; i < p.begin + p.local; ++i) {
            EXPECT_EQ(owner[size_t(i)], -1) << "element " << i << " owned twice";
            owner[size_t(i)] = r;
          }
        }
        EXPECT_EQ(s.shard_numel(), shard_offset);
        EXPECT_EQ(s.shard_numel(), BucketShards(buckets, ranks, 0).shard_numel()) << "shards of unequal size";
        owned += s.owned_numel();
      }
      EXPECT_EQ(owned, offset);
      EXPECT_EQ(std::count(owner.begin(), owner.end(), -1), 0) << "elements nobody owns";
    }
  EXPECT_THROW(BucketShards({}, 2, 2), std::invalid_argument);
}

// A bucket kept whole (parallel.modules zero_stage 0) is every rank's piece entire, without padding:
// each rank owns and updates all of it, beside its share of the others, and the shards stay equal.
TEST(BucketShards, ABucketKeptWholeIsEveryRanksPieceEntire) {
  const std::vector<GradBucket> buckets = {{0, 7, 0, 1, false}, {7, 5, 1, 1, true}, {12, 9, 2, 1, false}};
  for (int r = 0; r < 3; ++r) {
    const BucketShards s(buckets, 3, r);
    const ShardPiece& whole = s.pieces()[1];
    EXPECT_TRUE(whole.whole);
    EXPECT_EQ(whole.piece, 5);
    EXPECT_EQ(whole.padded_numel, 5);
    EXPECT_EQ(whole.begin, 7);
    EXPECT_EQ(whole.local, 5);
    EXPECT_EQ(whole.shard_offset, 3);  // after this rank's third of the first bucket
    EXPECT_FALSE(s.pieces()[0].whole);
    EXPECT_EQ(s.shard_numel(), 3 + 5 + 3);
    EXPECT_EQ(s.owned_numel(), s.pieces()[0].local + 5 + s.pieces()[2].local);
  }
}

TrainingRun train_at_stage(const std::string& dir, int nproc, std::vector<std::string> job, int stage) {
  job.push_back("zero_optimization.stage=" + std::to_string(stage));
  TrainingRun run = train(dir, nproc, job);
  EXPECT_EQ(run.result.exit_code, 0) << run.result.output;
  return run;
}

// `job` on 2 ranks stopped after step `stop` at `first_stage`, then resumed in the same run
// directory at `second_stage`; the resumed run, checked to have resumed there.
TrainingRun resumed_across_stages(const std::string& name, const std::vector<std::string>& job, int stop, int first_stage, int second_stage) {
  const std::string dir = scratch_dir(name + std::to_string(first_stage) + std::to_string(second_stage));
  auto first = job;
  first.push_back("train.stop_at_step=" + std::to_string(stop));
  train_at_stage(dir, 2, first, first_stage);
  const TrainingRun resumed = train_at_stage(dir, 2, job, second_stage);
  EXPECT_TRUE(contains(resumed.result.output, "resumed from " + ckpt(resumed.dir, stop) + " at step " + std::to_string(stop)))
      << resumed.result.output;
  return resumed;
}

// The checkpoint holds every parameter and its optimizer state by name, whatever pieces each rank
// wrote, so a run stopped under one stage continues under another: exactly as the uninterrupted run where both sides do the same arithmetic
// (stages 0 and 1; stages 2 and 3 with themselves), within the fp32 tolerance where the sums differ.
TEST(Zero, CheckpointsResumeAcrossStages) {
  const std::vector<std::string> job = {"train.steps=6", "train.deterministic=true", "zero_optimization.reduce_bucket_size=5000"};
  std::map<int, TrainingRun> straight;
  for (int stage : {0, 2, 3}) straight[stage] = train_at_stage(scratch_dir("zero_straight" + std::to_string(stage)), 2, job, stage);
  for (const auto& [first_stage, second_stage] :
       {std::pair{1, 0}, std::pair{0, 1}, std::pair{2, 2}, std::pair{2, 0}, std::pair{3, 3}, std::pair{3, 1}, std::pair{1, 3}}) {
    const TrainingRun resumed = resumed_across_stages("zero_resume_", job, 3, first_stage, second_stage);
    const TrainingRun& expected = straight[second_stage == 1 ? 0 : second_stage];
    if (first_stage != second_stage && std::max(first_stage, second_stage) >= 2) {
      expect_same_training(resumed, expected, 6);
      continue;
    }
    ASSERT_EQ(resumed.steps.size(), 6u);
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(resumed.steps[i]["loss"].get<double>(), expected.steps[i]["loss"].get<double>())
          << "stage " << first_stage << " then " << second_stage << ", step " << i + 1;
    expect_same_parameters(final_parameters(expected, 6), final_parameters(resumed, 6));
  }
}

TEST(ParameterFingerprint, OneUlpAnywhereOrTensorsSwappedChangeIt) {
  at::manual_seed(5);
  const std::vector<at::Tensor> params = {at::randn({3, 4}), at::randn({5})};
  const int64_t fingerprint = parameter_fingerprint(params);
  EXPECT_EQ(parameter_fingerprint({params[0].clone(), params[1].clone()}), fingerprint);
  for (int64_t i = 0; i < 5; ++i) {
    at::Tensor moved = params[1].clone();
    moved[i] = std::nextafter(moved[i].item<float>(), INFINITY);
    EXPECT_NE(parameter_fingerprint({params[0], moved}), fingerprint) << "element " << i;
  }
  const std::vector<at::Tensor> same_values = {at::ones({4}), at::full({4}, 2.0)};
  EXPECT_NE(parameter_fingerprint(same_values), parameter_fingerprint({same_values[1], same_values[0]}));
}

// Rank 0 writes what every rank holds, so every checkpoint first checks that the ranks agree bit for
// bit (every multi-rank test that saves passes that check at every stage). A rank whose parameters
// drifted by one ulp stops the run before anything of that step is written.
TEST(Zero, ACheckpointNeedsEveryRankToHoldTheSameParameters) {
  for (int stage : {1, 3}) {
    const std::string dir = scratch_dir("zero_drift" + std::to_string(stage));
    // At stage 3 the copies are the shards of hybrid sharding's replica groups: on 2 x 2, rank 3
    // holds rank 1's shard.
    const TrainingRun run =
        stage == 1 ? train(dir, 2, {"zero_optimization.stage=1", "checkpoint.every_steps=2"}, {}, {"DTRAIN_INJECT_REPLICA_DRIFT=4:1"})
                   : train(dir, 4,
                           {"parallel.fsdp.sharding_strategy=hybrid_shard", "parallel.fsdp.shard_group_size=2", "train_batch_size=16",
                            "train_micro_batch_size_per_gpu=4", "checkpoint.every_steps=2"},
                           {}, {"DTRAIN_INJECT_REPLICA_DRIFT=4:3"});
    EXPECT_NE(run.result.exit_code, 0) << run.result.output;
    const std::string expected = stage == 1 ? "after step 4 the parameters of rank 1 differ from rank 0's"
                                            : "after step 4 the parameter shard of rank 3 differs from rank 1's";
    EXPECT_TRUE(contains(run.result.output, expected)) << run.result.output;
    EXPECT_TRUE(std::filesystem::exists(dir + "/ckpt/step-00000002")) << "stage " << stage;
    EXPECT_FALSE(std::filesystem::exists(dir + "/ckpt/step-00000004")) << "stage " << stage;
  }
}

// On a CPU run the state already lives in host memory: cpu offload is accepted, said, and changes
// nothing.
TEST(Zero, CpuOffloadOnACpuRunIsAcceptedAndSaysSo) {
  const TrainingRun run = train_at_stage(scratch_dir("zero_offload_cpu"), 1,
                                         {"zero_optimization.offload_optimizer={\"device\":\"cpu\"}",
                                          "zero_optimization.offload_param={\"device\":\"cpu\"}"},
                                         3);
  EXPECT_TRUE(contains(run.result.output, "zero_optimization.offload_optimizer.device=cpu: this run computes on the CPU, so the "
                                          "optimizer state already live in host memory; nothing moves"))
      << run.result.output;
  EXPECT_TRUE(contains(run.result.output, "offload_param.device=cpu: this run computes on the CPU, so the parameters already live"))
      << run.result.output;
}

TEST(Zero, OutOfRangeStageIsRefusedByName) {
  const TrainingRun seven = train(scratch_dir("zero_stage7"), 1, {"zero_optimization.stage=7"});
  EXPECT_NE(seven.result.exit_code, 0);
  EXPECT_TRUE(contains(seven.result.output, "'zero_optimization.stage' must be")) << seven.result.output;
}

// A model's parts as TransformerImpl::forward_parts lists them: the parameters named, their tensors
// beside the point.
std::vector<ForwardPart> parts_of(const std::vector<std::pair<int, std::vector<std::string>>>& named, int n_layer) {
  std::vector<ForwardPart> parts;
  for (const auto& [index, names] : named) {
    const auto kind = index == 0 ? ForwardPart::Kind::Embeddings : index <= n_layer ? ForwardPart::Kind::Block : ForwardPart::Kind::Head;
    ForwardPart part{kind, index, {}};
    for (const auto& name : names) part.parameters.emplace_back(name, at::Tensor());
    parts.push_back(part);
  }
  return parts;
}

TEST(ParameterUnits, EachBlockIsAUnitAndTheRestRunsWhereTheyLie) {
  auto entries_of = [](const std::vector<std::string>& names) {
    std::vector<FlatEntry> entries;
    for (size_t i = 0; i < names.size(); ++i) entries.push_back({names[i], at::Tensor(), int64_t(i) * 10, 10, true});
    return entries;
  };
  const ParameterParts two_blocks(parts_of({{0, {"wte.weight", "wpe.weight"}},
                                            {1, {"blocks.0.q_proj.bias"}},
                                            {2, {"blocks.1.ln1.weight", "blocks.1.up_proj.weight"}},
                                            {3, {"ln_f.weight", "ln_f.bias", "lm_head.weight"}}},
                                           2));
  // Backward's order, untied head: the head's run, the blocks from the last, the embeddings.
  const auto units = make_unit_buckets(entries_of({"lm_head.weight", "ln_f.bias", "ln_f.weight", "blocks.1.up_proj.weight",
                                                   "blocks.1.ln1.weight", "blocks.0.q_proj.bias", "wpe.weight", "wte.weight"}),
                                       two_blocks);
  ASSERT_EQ(units.size(), 4u);
  const std::vector<std::pair<int, int>> expected = {{0, 3}, {3, 2}, {5, 1}, {6, 2}};
  for (size_t u = 0; u < units.size(); ++u) {
    EXPECT_EQ(units[u].first_entry, expected[u].first) << "unit " << u;
    EXPECT_EQ(units[u].entries, expected[u].second) << "unit " << u;
    EXPECT_EQ(units[u].offset, expected[u].first * 10) << "unit " << u;
    EXPECT_EQ(units[u].numel, expected[u].second * 10) << "unit " << u;
  }
  // Under mixed precision a part's matmul-only weights are a unit of their own; the layout puts them
  // first in their part (last in registration order, which the flat buffer reverses).
  const at::Tensor q = at::zeros({2}), up = at::zeros({2}), ln = at::zeros({2}), bias = at::zeros({2}), wte = at::zeros({2});
  const ParameterParts one_block(parts_of({{0, {"wte.weight"}},
                                           {1, {"blocks.0.ln1.weight", "blocks.0.q_proj.weight", "blocks.0.q_proj.bias",
                                                "blocks.0.up_proj.weight"}}},
                                          1));
  const auto named = group_matmul_weights({{"wte.weight", wte}, {"blocks.0.ln1.weight", ln}, {"blocks.0.q_proj.weight", q},
                                           {"blocks.0.q_proj.bias", bias}, {"blocks.0.up_proj.weight", up}},
                                          one_block, {q, up});
  std::vector<std::string> order;
  for (const auto& [name, t] : named) order.push_back(name);
  EXPECT_EQ(order, (std::vector<std::string>{"wte.weight", "blocks.0.ln1.weight", "blocks.0.q_proj.bias", "blocks.0.q_proj.weight",
                                             "blocks.0.up_proj.weight"}));
  std::vector<FlatEntry> entries;
  for (auto it = named.rbegin(); it != named.rend(); ++it) entries.push_back({it->first, it->second, int64_t(entries.size()) * 10, 10, true});
  const auto split = make_unit_buckets(entries, one_block, {q, up});
  ASSERT_EQ(split.size(), 3u);
  EXPECT_EQ(split[0].entries, 2);  // the up and q weights
  EXPECT_EQ(split[1].entries, 2);  // the bias and the norm
  EXPECT_EQ(split[2].entries, 1);  // the embedding
  EXPECT_EQ(make_unit_buckets(entries, one_block).size(), 2u);
  // Parameters kept whole (parallel.modules zero_stage 0) are units of their own, marked whole.
  const auto kept = make_unit_buckets(entries, one_block, {}, {}, [](const std::string& name) { return name == "blocks.0.q_proj.bias"; });
  ASSERT_EQ(kept.size(), 4u);  // the block's weights, its bias, its norm; the embedding
  EXPECT_EQ(kept[1].entries, 1);
  EXPECT_TRUE(kept[1].whole);
  for (size_t u : {0, 2, 3}) EXPECT_FALSE(kept[u].whole) << "unit " << u;
}

// A parameter named by a RowSplit becomes units of whole rows of about equal size, none over the
// bound, and the entry after it starts a unit of its own; only those units cover part of an entry.
TEST(ParameterUnits, ATableCutByRowsIsUnitsOfWholeRowsNoLargerThanTheBound) {
  const ParameterParts parts(parts_of({{0, {"wte.weight", "wpe.weight"}}, {1, {"blocks.0.ln1.weight"}}}, 1));
  // 10 rows of 4 elements; wpe (8) before it in the flat buffer, the block's norm (4) after.
  const std::vector<FlatEntry> entries = {{"blocks.0.ln1.weight", at::Tensor(), 0, 4, true},
                                          {"wpe.weight", at::Tensor(), 4, 8, true},
                                          {"wte.weight", at::Tensor(), 12, 40, true}};
  const auto units = make_unit_buckets(entries, parts, {}, RowSplit{"wte.weight", 4, 13});
  // At most 13 elements: 3 rows; ceil(10 / 3) = 4 units of ceil(10 / 4) = 3 rows, the last 1.
  ASSERT_EQ(units.size(), 6u);
  EXPECT_EQ(units[1].numel, 8);  // wpe alone: the table is not in its unit
  const std::vector<std::pair<int64_t, int64_t>> rows = {{12, 12}, {24, 12}, {36, 12}, {48, 4}};
  for (size_t k = 0; k < rows.size(); ++k) {
    const GradBucket& u = units[k + 2];
    EXPECT_EQ(u.offset, rows[k].first) << "row unit " << k;
    EXPECT_EQ(u.numel, rows[k].second) << "row unit " << k;
    EXPECT_EQ(u.first_entry, 2);
    EXPECT_EQ(u.entries, 1);
    EXPECT_TRUE(is_row_unit(u, entries)) << "row unit " << k;
  }
  EXPECT_FALSE(is_row_unit(units[0], entries));
  EXPECT_FALSE(is_row_unit(units[1], entries));
  EXPECT_EQ(make_unit_buckets(entries, parts).size(), 2u);  // without the split: the block, the embeddings
}

// The part of a parameter is what the model's list says, whatever its name: a stage holding blocks
// 2 and 3 alone keeps their global part indices, and a name no part lists is refused by name.
TEST(ParameterUnits, APartIsWhatTheModelListsNotWhatTheNameSays) {
  TransformerConfig c = model_preset("tiny");
  c.n_layer = 4;
  const TransformerParts middle = TransformerParts::blocks(2, 4);
  const ParameterParts parts(Transformer(c, 1, middle)->forward_parts());
  EXPECT_EQ(parts.of("blocks.2.q_proj.weight"), 3);
  EXPECT_EQ(parts.of("blocks.3.down_proj.bias"), 4);
  EXPECT_EQ(parts.end(), 5);
  for (const char* absent : {"blocks.1.q_proj.weight", "wte.weight", "ln_f.weight", "mystery.weight"}) {
    try {
      parts.of(absent);
      ADD_FAILURE() << absent << " was given a part";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), std::string("parameter '") + absent + "' belongs to no part of the model's forward pass");
    }
  }
}

// The trace of a real step (wall_clock_breakdown), read for order, never for durations: in forward
// each block's successor is being gathered before the block's compute ends, and each block but the
// last is freed before its backward; in backward each block gathers its predecessor as it begins.
TEST(ZeroStage3, PrefetchesTheNextUnitWhileAPartComputes) {
  const int layers = 4;
  const TrainingRun run = train_at_stage(scratch_dir("zero3_trace"), 2,
                                         {"model.n_layer=" + std::to_string(layers), "train.steps=2", "wall_clock_breakdown=true",
                                          "parallel.fsdp.sharding_strategy=full_shard"},
                                         0);
  ASSERT_EQ(run.steps.size(), 2u);
  const auto& trace = run.steps[1]["unit_trace"];
  ASSERT_TRUE(trace.is_array()) << run.steps[1].dump();
  std::vector<std::pair<std::string, int>> events;
  std::vector<double> times;
  for (const auto& e : trace) {
    events.emplace_back(e[0].get<std::string>(), e[1].get<int>());
    times.push_back(e[2].get<double>());
  }
  EXPECT_TRUE(std::is_sorted(times.begin(), times.end()));
  auto find = [&](const std::string& what, int part, size_t from = 0) {
    const auto it = std::find(events.begin() + long(from), events.end(), std::make_pair(what, part));
    EXPECT_NE(it, events.end()) << what << " " << part << " after event " << from << " in " << trace.dump();
    return size_t(it - events.begin());
  };
  for (int part = 1; part <= layers; ++part) {
    const size_t begin = find("begin", part), end = find("end", part, begin);
    const size_t next_gather = find("gather", part + 1);
    EXPECT_LT(next_gather, end) << "part " << part + 1 << " is gathered only after part " << part << " computed: " << trace.dump();
    const size_t backward = find("backward", part, end);
    if (part < layers) EXPECT_LT(find("free", part, end), backward) << "block " << part << " kept whole until its backward";
    if (part > 1) EXPECT_LT(find("gather", part - 1, backward), find("free", part, backward)) << "block " << part - 1 << " not prefetched";
  }
  // The tied embedding's unit (part 0) is read by the head's backward and by no other: it goes as
  // the last block's backward begins, not once the embeddings' gradients are taken at the end.
  const size_t head_end = find("end", layers + 1);
  EXPECT_LT(find("free", 0, head_end), find("backward", layers - 1, head_end)) << "the tied embedding kept whole: " << trace.dump();
}

// Untied, nothing after the embeddings reads their unit and their backward reads no values: it is
// freed as soon as their forward ends.
TEST(ZeroStage3, AnUntiedEmbeddingIsFreedRightAfterItsForward) {
  const TrainingRun run = train_at_stage(scratch_dir("zero3_untied"), 2,
                                         {"model.n_layer=2", "model.tie_embeddings=false", "train.steps=2", "wall_clock_breakdown=true"}, 3);
  ASSERT_EQ(run.steps.size(), 2u);
  std::vector<std::pair<std::string, int>> events;
  for (const auto& e : run.steps[1]["unit_trace"]) events.emplace_back(e[0].get<std::string>(), e[1].get<int>());
  const auto at = [&](const std::string& what, int part) { return std::find(events.begin(), events.end(), std::make_pair(what, part)); };
  ASSERT_NE(at("end", 0), events.end()) << run.steps[1].dump();
  EXPECT_EQ(std::next(at("end", 0)), at("free", 0)) << run.steps[1]["unit_trace"].dump();
}

// A bucket of more than twice reduce_bucket_size goes in rounds of at most reduce_bucket_size (plus
// the padding to a multiple of dp), a smaller one whole: here the tied embedding's unit at stage 3,
// and its bucket at stage 2, are four times that, every other under twice it. No send buffer is
// then the embedding's size, and training is the reference's within the fp32 tolerance of
// reordered sums.
TEST(ZeroStage3, TheEmbeddingsGradientIsReducedInRoundsNoLargerThanABucket) {
  const int64_t bucket = 16000, embedding = 2048 * 32 + 16 * 32;  // wte + wpe of the tiny model with 2048 tokens
  const std::vector<std::string> job = {"model.vocab_size=2048", "train.steps=3", "wall_clock_breakdown=true",
                                        "zero_optimization.reduce_bucket_size=" + std::to_string(bucket)};
  const TrainingRun reference = train_at_stage(scratch_dir("zero_rounds_reference"), 2, job, 0);
  for (int stage : {2, 3}) {
    const TrainingRun run = train_at_stage(scratch_dir("zero_rounds_" + std::to_string(stage)), 2, job, stage);
    ASSERT_EQ(run.steps.size(), 3u) << run.result.output;
    const int64_t largest = run.steps[2]["largest_send_numel"].get<int64_t>();
    EXPECT_LE(largest, 2 * bucket) << "stage " << stage;
    EXPECT_GT(largest, 0) << "stage " << stage;
    EXPECT_LT(largest, embedding) << "stage " << stage;
    expect_same_training(run, reference, 3);
  }
}

// Where communication is slower than backward (4 ranks on 2 cores, reduce_bucket_size 2,000 bytes:
// buckets of a few parameters, those of the MLP's weights in rounds), send buffers used to pile up,
// one per bucket launched (GPT-2 124M at dp 4 held 17% more than its estimate); backward now copies
// a bucket only once at most one other reduction is in flight (none before rounds), so the send
// buffers alive at once never hold more than two of the largest. Training is the reference's
// within the fp32 tolerance of reordered sums.
TEST(ZeroStage2, AtMostTwoBucketsSendBuffersAreAliveAtOnce) {
  const std::vector<std::string> job = {"train.steps=3", "wall_clock_breakdown=true", "zero_optimization.reduce_bucket_size=2000"};
  const TrainingRun run = train_at_stage(scratch_dir("zero2_in_flight"), 4, job, 2);
  ASSERT_EQ(run.steps.size(), 3u) << run.result.output;
  for (const auto& step : run.steps) {
    const int64_t largest = step["largest_send_numel"].get<int64_t>(), most = step["most_send_numel_in_flight"].get<int64_t>();
    EXPECT_GE(most, largest) << step.dump();
    EXPECT_LE(most, 2 * largest) << step.dump();
  }
  expect_same_training(run, train_at_stage(scratch_dir("zero2_in_flight_reference"), 4, job, 0), 3);
}

// A tied table larger than a block (the tiny model with 2048 tokens: 64 Ki elements against a
// block's 12.7 Ki) is cut into units of rows at stage 3, which the lookup and the head read one at a
// time and whose gradients are reduced as the head's backward hands each over, the lookup's rows
// after: training is the reference's within the fp32 tolerance of reordered sums, with two micro-batches
// accumulated, and a checkpoint written that way resumes at stage 1, and one of stage 1 at stage 3.
TEST(ZeroStage3, ATiedTableLargerThanABlockIsReadAndReducedByRows) {
  const std::vector<std::string> job = {"model.vocab_size=2048", "train.steps=4", "train_batch_size=16",
                                        "train_micro_batch_size_per_gpu=4"};
  const TrainingRun reference = train_at_stage(scratch_dir("zero_rows_reference"), 2, job, 0);
  const TrainingRun run = train_at_stage(scratch_dir("zero_rows"), 2, job, 3);
  EXPECT_TRUE(contains(run.result.output, "zero-3: wte.weight in 6 units of rows")) << run.result.output;
  expect_same_training(run, reference, 4);
  for (const auto& [first_stage, second_stage] : {std::pair{3, 1}, std::pair{1, 3}}) {
    expect_same_training(resumed_across_stages("zero_rows_resume_", job, 2, first_stage, second_stage), reference, 4);
  }
  // Under bf16 the head rounds each block as it reads it, as the whole table's working copy is rounded.
  auto bf16 = job;
  bf16.push_back("bf16.enabled=true");
  expect_equivalent(train_at_stage(scratch_dir("zero_rows_bf16"), 2, bf16, 3), train_at_stage(scratch_dir("zero_rows_bf16_reference"), 2, bf16, 0),
                    kBf16Reordered, "bf16 at stage 3 with the table in units of rows against stage 0");
}

// Stages 1 and 2 gather the updated parameters during the next forward pass: each bucket's gather
// is waited for just before the first part that reads it (wall_clock_breakdown records which), so
// the embeddings' bucket, launched first, is waited for before part 0, and the first bucket (the head
// and the end of the last block) only before the last block; a step that waited for every gather at
// its start would show none of them in a part.
TEST(ZeroStage1, TheUpdatedParametersAreGatheredDuringTheNextForwardPass) {
  const int layers = 4;
  for (int stage : {1, 2}) {
    const TrainingRun run = train_at_stage(scratch_dir("zero_gather_overlap"), 2,
                                           {"model.n_layer=" + std::to_string(layers), "train.steps=2", "wall_clock_breakdown=true",
                                            "zero_optimization.reduce_bucket_size=3000"},
                                           stage);
    ASSERT_EQ(run.steps.size(), 2u);
    const auto& waits = run.steps[1]["gather_waited_before_part"];
    ASSERT_TRUE(waits.is_array() && waits.size() >= 3) << run.steps[1].dump();
    EXPECT_EQ(waits.back(), 0) << "the embeddings' bucket: " << waits.dump();
    EXPECT_GE(waits.front(), layers) << "the first bucket: " << waits.dump();
    for (size_t b = 1; b < waits.size(); ++b) EXPECT_GE(waits[b - 1], waits[b]) << "buckets waited out of order: " << waits.dump();
  }
}

}  // namespace
}  // namespace dtrain::test
