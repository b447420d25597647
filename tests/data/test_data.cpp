#include <gtest/gtest.h>
#include <torch/types.h>

#include <ATen/CPUGeneratorImpl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <set>

#include "data/distributed_sampler.h"
#include "data/hashed_permutation.h"
#include "data/micro_batch_stream.h"
#include "data/token_dataset.h"
#include "data/token_source.h"
#include "support/scratch.h"

using namespace dtrain;
using dtrain::test::scratch_dir;
namespace fs = std::filesystem;

namespace {

void write_bytes(const std::string& path, const void* data, size_t n) {
  std::ofstream(path, std::ios::binary).write(static_cast<const char*>(data), std::streamsize(n));
}

// Tokens 0, 1, 2, ... (mod 256), `n` of them.
TokenStream counting(int n) {
  std::string bytes(size_t(n), '\0');
  for (int i = 0; i < n; ++i) bytes[size_t(i)] = char(i % 256);
  return TokenStream::of_text(bytes);
}

std::vector<int64_t> all_tokens(const TokenStream& s) {
  std::vector<int64_t> tokens(size_t(s.size()));
  s.read(0, s.size(), tokens.data());
  return tokens;
}

}  // namespace

TEST(DistributedSampler, RanksAreDisjointAndCoverEverySampleWithPadding) {
  for (ShuffleOrder order : {ShuffleOrder::Randperm, ShuffleOrder::Hashed}) {
    const int64_t n = 103;
    std::multiset<int64_t> seen;
    for (int r = 0; r < 4; ++r) {
      DistributedSampler s(n, 4, r, {true, 7, false, order});
      EXPECT_EQ(s.num_samples(), 26);
      for (auto i : s.indices()) seen.insert(i);
    }
    EXPECT_EQ(seen.size(), 104u);  // 103 plus one repeated to pad to 4 x 26
    for (int64_t i = 0; i < n; ++i) EXPECT_GE(seen.count(i), 1u) << shuffle_order_name(order);
  }
}

TEST(DistributedSampler, DropLastTruncatesAndRanksStayDisjoint) {
  for (ShuffleOrder order : {ShuffleOrder::Randperm, ShuffleOrder::Hashed}) {
    std::set<int64_t> seen;
    for (int r = 0; r < 4; ++r) {
      DistributedSampler s(103, 4, r, {true, 7, true, order});
      EXPECT_EQ(s.num_samples(), 25);
      for (auto i : s.indices()) EXPECT_TRUE(seen.insert(i).second) << "sample " << i << " given twice";
    }
    EXPECT_EQ(seen.size(), 100u) << shuffle_order_name(order);
  }
}

TEST(DistributedSampler, ShuffleDependsOnSeedAndEpochAndIsReproducible) {
  for (ShuffleOrder order : {ShuffleOrder::Randperm, ShuffleOrder::Hashed}) {
    DistributedSampler a(50, 1, 0, {true, 1, false, order}), b(50, 1, 0, {true, 1, false, order}),
        c(50, 1, 0, {true, 2, false, order});
    EXPECT_EQ(a.indices(), b.indices());
    EXPECT_NE(a.indices(), c.indices());
    const auto epoch0 = a.indices();
    a.set_epoch(1);
    EXPECT_NE(a.indices(), epoch0) << shuffle_order_name(order);
    a.set_epoch(0);
    EXPECT_EQ(a.indices(), epoch0) << shuffle_order_name(order);
    DistributedSampler plain(5, 1, 0, {false, 0, false, order});
    EXPECT_EQ(plain.indices(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  }
  // Without shuffle the identity, dealt round-robin and padded with the head like any order.
  EXPECT_EQ(DistributedSampler(5, 2, 0, {false, 0, false}).indices(), (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(DistributedSampler(5, 2, 1, {false, 0, false}).indices(), (std::vector<int64_t>{1, 3, 0}));
}

// The randperm order is PyTorch's DistributedSampler's: torch.randperm(n, generator seeded with
// seed + epoch), padded with its head and dealt round-robin.
TEST(DistributedSampler, TheRandpermOrderIsPyTorchs) {
  const int64_t n = 11;
  for (int64_t epoch : {0, 3}) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(uint64_t(5 + epoch));
    const at::Tensor perm = at::randperm(n, gen, at::kLong);
    for (int r = 0; r < 3; ++r) {
      DistributedSampler s(n, 3, r, {true, 5, false, ShuffleOrder::Randperm});
      s.set_epoch(epoch);
      std::vector<int64_t> expected;
      for (int64_t p = r; p < 12; p += 3) expected.push_back(perm[p % n].item<int64_t>());
      EXPECT_EQ(s.indices(), expected) << "epoch " << epoch << " rank " << r;
    }
  }
}

TEST(DistributedSampler, TheFirstKOfEveryRankAreTheFirstKTimesRSamplesOfTheOneRankOrder) {
  // What makes 1x16, 2x8 and 4x4 see the same global batches.
  for (ShuffleOrder order : {ShuffleOrder::Randperm, ShuffleOrder::Hashed}) {
    DistributedSampler one(64, 1, 0, {true, 3, true, order});
    const auto whole = one.indices();
    for (int ranks : {2, 4}) {
      std::multiset<int64_t> first, expected(whole.begin(), whole.begin() + 16);
      for (int r = 0; r < ranks; ++r) {
        const auto mine = DistributedSampler(64, ranks, r, {true, 3, true, order}).indices();
        first.insert(mine.begin(), mine.begin() + 16 / ranks);
      }
      EXPECT_EQ(first, expected) << ranks << " ranks, " << shuffle_order_name(order);
    }
  }
}

// The hashed order is a bijection of [0, n) for every n, powers of two or not, and another one for
// another key (the sampler's seed + epoch). Powers of two come first: they need no cycle-walking,
// so a network that is no bijection fails there instead of walking forever at other sizes.
TEST(HashedPermutation, EveryIndexAppearsExactlyOnce) {
  for (int64_t n : {4, 8, 64, 1024, 1, 2, 3, 5, 7, 63, 65, 100, 1000, 4097, 100003}) {
    for (uint64_t key : {0ULL, 1ULL, 0xdeadbeefULL}) {
      const HashedPermutation perm(n, key);
      std::vector<char> seen(size_t(n), 0);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t image = perm(i);
        ASSERT_TRUE(image >= 0 && image < n) << "n " << n << " key " << key << ": " << i << " -> " << image;
        ASSERT_FALSE(seen[size_t(image)]) << "n " << n << " key " << key << ": " << image << " twice";
        seen[size_t(image)] = 1;
      }
    }
  }
  std::vector<int64_t> a, b, identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  const HashedPermutation p(1000, 1), q(1000, 2);
  for (int64_t i = 0; i < 1000; ++i) a.push_back(p(i)), b.push_back(q(i));
  EXPECT_NE(a, b);
  EXPECT_NE(a, identity);
  EXPECT_THROW(HashedPermutation(0, 1), std::invalid_argument);
  EXPECT_THROW(p(1000), std::out_of_range);
}

// "auto" keeps PyTorch's order while its indices fit in 64 MiB (2^23 samples).
TEST(ShuffleOrder, AutoChoosesRandpermUpTo2To23SamplesAndHashedAbove) {
  EXPECT_EQ(resolve_shuffle_order(std::nullopt, 1), ShuffleOrder::Randperm);
  EXPECT_EQ(resolve_shuffle_order(std::nullopt, int64_t(1) << 23), ShuffleOrder::Randperm);
  EXPECT_EQ(resolve_shuffle_order(std::nullopt, (int64_t(1) << 23) + 1), ShuffleOrder::Hashed);
  EXPECT_EQ(resolve_shuffle_order(ShuffleOrder::Hashed, 10), ShuffleOrder::Hashed);
  EXPECT_EQ(resolve_shuffle_order(ShuffleOrder::Randperm, int64_t(1) << 40), ShuffleOrder::Randperm);
  EXPECT_EQ(parse_shuffle_order("auto"), std::nullopt);
  EXPECT_EQ(parse_shuffle_order("hashed"), ShuffleOrder::Hashed);
  EXPECT_EQ(parse_shuffle_order("randperm"), ShuffleOrder::Randperm);
  EXPECT_THROW(parse_shuffle_order("random"), std::invalid_argument);
}

TEST(TokenDataset, WindowsShiftTargetsAndSplitsDoNotOverlap) {
  const TokenStream tokens = counting(101);
  TokenDataset ds(tokens, 10, 0.2, 256);
  EXPECT_EQ(ds.size(Split::Train), 8);
  EXPECT_EQ(ds.size(Split::Validation), 2);
  auto [x, y, images] = ds.batch(Split::Train, {0, 7});
  EXPECT_EQ(images.count(), 0);
  EXPECT_EQ(x[1][0].item<int64_t>(), 70);
  EXPECT_EQ(y[1][9].item<int64_t>(), 80);
  auto [vx, vy, no_images] = ds.batch(Split::Validation, {0});
  EXPECT_EQ(vx[0][0].item<int64_t>(), 80);
  EXPECT_THROW(TokenDataset(tokens, 10, 0.0, 50), std::invalid_argument);  // token 100 >= vocab 50
  EXPECT_THROW(TokenDataset(tokens, 200, 0.0, 256), std::invalid_argument);
}

TEST(MicroBatchStream, RestoringAPositionContinuesWithTheSameBatches) {
  auto ds = std::make_shared<TokenDataset>(counting(2001), 10, 0.0, 256);
  MicroBatchStream a(ds, 2, 1, 4, 1, {true, 5, true});
  for (int i = 0; i < 30; ++i) a.next();  // crosses an epoch (200 samples / 2 ranks / 4 per batch = 25 per epoch)
  const auto pos = a.position();
  EXPECT_EQ(pos.epoch, 1);
  EXPECT_EQ(pos.samples, 40);  // 5 micro-batches of 4 on each of 2 ranks
  MicroBatchStream b(ds, 2, 1, 4, 1, {true, 5, true});
  b.restore(pos);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(torch::equal(a.next().x, b.next().x));
  EXPECT_THROW(b.restore({0, 1000}), std::invalid_argument);
}

// What the ranks draw after a restore depends on the position, not on how many ranks drew before:
// 2 ranks stopped at a position and 4 ranks restored there draw the same next samples.
TEST(MicroBatchStream, APositionCarriesOverToAnotherNumberOfRanks) {
  for (ShuffleOrder order : {ShuffleOrder::Randperm, ShuffleOrder::Hashed}) {
    SCOPED_TRACE(shuffle_order_name(order));
    auto ds = std::make_shared<TokenDataset>(counting(2001), 10, 0.0, 256);
    const SamplerOptions options{true, 5, true, order};
    auto first_tokens = [](std::vector<MicroBatchStream>& ranks, int batches) {
      std::vector<int64_t> tokens;
      for (auto& r : ranks)
        for (int i = 0; i < batches; ++i) {
          const at::Tensor x = r.next().x;
          for (int64_t s = 0; s < x.size(0); ++s) tokens.push_back(x[s][0].item<int64_t>() * 1000 + x[s][1].item<int64_t>());
        }
      std::sort(tokens.begin(), tokens.end());
      return tokens;
    };
    std::vector<MicroBatchStream> two, four;
    for (int r = 0; r < 2; ++r) two.emplace_back(ds, 2, r, 2, 1, options);
    for (int r = 0; r < 4; ++r) four.emplace_back(ds, 4, r, 2, 1, options);
    first_tokens(two, 5);
    const DataPosition pos = two[0].position();
    ASSERT_EQ(pos.samples, 20);
    EXPECT_EQ(two[1].position().samples, 20);
    for (auto& r : four) r.restore(pos);
    EXPECT_EQ(first_tokens(two, 2), first_tokens(four, 1));  // the permutation's samples 20..27 either way
  }
}

namespace {
// Every sample `ranks` streams (micro-batch 2, `per_step` micro-batches a step) draw in `steps`
// steps from `from`, in the order of the permutation (step by step, micro-batch by micro-batch,
// rank by rank), and the position they end at.
std::pair<std::vector<int64_t>, DataPosition> draw(const std::shared_ptr<TokenDataset>& ds, int ranks, int64_t per_step,
                                                   DataPosition from, int steps, ShuffleOrder order) {
  std::vector<MicroBatchStream> streams;
  for (int r = 0; r < ranks; ++r) {
    streams.emplace_back(ds, ranks, r, 2, per_step, SamplerOptions{true, 5, true, order});
    streams.back().restore(from);
  }
  std::vector<int64_t> seen;
  for (int s = 0; s < steps; ++s)
    for (int64_t m = 0; m < per_step; ++m) {
      std::vector<at::Tensor> firsts;
      for (auto& stream : streams) firsts.push_back(stream.next().x);
      for (int64_t i = 0; i < 2; ++i)  // the samples a micro-batch takes are dealt round-robin
        for (const auto& x : firsts) seen.push_back(x[i][0].item<int64_t>());  // sample s is token s
    }
  return {seen, streams[0].position()};
}
}  // namespace

// A run that changes its number of ranks, and with it its global batch, mid-epoch takes up the
// permutation exactly where it stood: nothing seen twice, nothing skipped. 4 ranks at a global batch
// of 16 stop after 3 steps (48 samples, which 3 ranks do not divide), 3 ranks at 18 go on; the
// epoch of 200 samples ends when less than a global batch is left of it, and the next one starts
// its permutation from the beginning.
TEST(MicroBatchStream, AChangeOfRanksAndGlobalBatchContinuesThePermutationExactly) {
  for (ShuffleOrder order : {ShuffleOrder::Randperm, ShuffleOrder::Hashed}) {
    SCOPED_TRACE(shuffle_order_name(order));
    auto ds = std::make_shared<TokenDataset>(counting(201), 1, 0.0, 256);
    const auto [one_rank, end_one] = draw(ds, 1, 100, {0, 0}, 2, order);  // two epochs of 200 in steps of 200
    ASSERT_EQ(end_one.epoch, 1);
    const auto [before, middle] = draw(ds, 4, 2, {0, 0}, 3, order);
    ASSERT_EQ(middle.samples, 48);
    const auto [after, end] = draw(ds, 3, 3, middle, 9, order);  // 8 steps to 192, then 8 left: the next epoch
    EXPECT_EQ(end.epoch, 1);
    EXPECT_EQ(end.samples, 18);
    std::vector<int64_t> seen = before;
    seen.insert(seen.end(), after.begin(), after.end());
    const std::vector<int64_t> expected_first(one_rank.begin(), one_rank.begin() + 192);
    EXPECT_EQ(std::vector<int64_t>(seen.begin(), seen.begin() + 192), expected_first);
    EXPECT_EQ(std::vector<int64_t>(seen.begin() + 192, seen.end()), std::vector<int64_t>(one_rank.begin() + 200, one_rank.begin() + 218));
  }
}

// The end of an epoch depends on the global batch alone: 4 ranks x micro-batch 2 and 2 ranks x
// micro-batch 2 x accumulation 2 drop the same tail (204 samples, global batch 16: 12 dropped), where
// trimming to whole micro-batches on every rank dropped 4 samples on 4 ranks and none on 2.
TEST(MicroBatchStream, TheEpochsTailDependsOnTheGlobalBatchNotOnTheRanks) {
  auto ds = std::make_shared<TokenDataset>(counting(205), 1, 0.0, 256);
  ASSERT_EQ(ds->size(Split::Train), 204);
  const auto [four, end_four] = draw(ds, 4, 2, {0, 0}, 13, ShuffleOrder::Randperm);
  const auto [two, end_two] = draw(ds, 2, 4, {0, 0}, 13, ShuffleOrder::Randperm);
  EXPECT_EQ(four, two);
  EXPECT_EQ(end_four.epoch, 1);
  EXPECT_EQ(end_four.samples, 16);
  EXPECT_EQ(end_two.samples, 16);
}

TEST(TokenSource, ReadsLlmcAndNanogptShardsInNameOrder) {
  const auto dir = scratch_dir("data_bin");
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520, header[1] = 1, header[2] = 3;
  std::vector<uint16_t> a = {1, 2, 3}, b = {400, 500};
  {
    std::ofstream f(dir + "/a.bin", std::ios::binary);
    f.write(reinterpret_cast<const char*>(header.data()), 1024);
    f.write(reinterpret_cast<const char*>(a.data()), 6);
  }
  write_bytes(dir + "/b.bin", b.data(), 4);
  const auto src = load_tokens("bin:" + dir + "/*.bin");
  EXPECT_EQ(all_tokens(src.tokens), (std::vector<int64_t>{1, 2, 3, 400, 500}));

  header[2] = 10;  // promises more tokens than the file holds
  {
    std::ofstream f(dir + "/c.bin", std::ios::binary);
    f.write(reinterpret_cast<const char*>(header.data()), 1024);
    f.write(reinterpret_cast<const char*>(a.data()), 6);
  }
  try {
    load_tokens("bin:" + dir + "/*.bin");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("c.bin"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_tokens("bin:" + dir + "/none*.bin"), std::runtime_error);
}

TEST(TokenSource, TextFilesAndErrorsNameTheSource) {
  const auto dir = scratch_dir("data_text");
  std::ofstream(dir + "/t.txt") << "hello";
  const auto src = load_tokens("text:" + dir + "/t.txt");
  EXPECT_EQ(all_tokens(src.tokens), (std::vector<int64_t>{'h', 'e', 'l', 'l', 'o'}));
  try {
    load_tokens("text:" + dir + "/missing.txt");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.txt"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("data.source"), std::string::npos);
  }
  EXPECT_THROW(load_tokens("csv:x"), std::runtime_error);
}

TEST(TokenSource, BuiltinFallsBackToSyntheticTextWhenFortunesAreMissing) {
  const auto dir = scratch_dir("data_empty");
  ::setenv("DTRAIN_FORTUNES_DIR", dir.c_str(), 1);
  const auto src = load_tokens("builtin");
  ::unsetenv("DTRAIN_FORTUNES_DIR");
  EXPECT_FALSE(src.warning.empty());
  EXPECT_GT(src.tokens.size(), 100000);
}

namespace {

std::string load_error(const std::string& source) {
  try {
    load_tokens(source);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(TokenSource, WhatIsNotAReadableTextFileIsNamedWithWhatItIs) {
  const auto dir = scratch_dir("data_kinds");
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);  // opening it would block: the test would hang
  std::ofstream(dir + "/empty.txt");
  std::ofstream(dir + "/one.txt") << "x";
  EXPECT_EQ(load_error("text:" + dir), "data.source: text file '" + dir + "' is a directory");
  EXPECT_EQ(load_error("text:" + dir + "/fifo"), "data.source: text file '" + dir + "/fifo' is a FIFO, not a regular file");
  EXPECT_EQ(load_error("text:/dev/zero"), "data.source: text file '/dev/zero' is a device, not a regular file");
  EXPECT_EQ(load_error("text:" + dir + "/missing.txt"), "data.source: text file '" + dir + "/missing.txt' does not exist");
  EXPECT_EQ(load_error("text:" + dir + "/empty.txt"), "data.source: text file '" + dir + "/empty.txt' is empty");
  EXPECT_EQ(load_error("text:" + dir + "/one.txt"), "data.source: text file '" + dir + "/one.txt' holds 1 byte; at least 2 are needed");
  // A glob that matches a directory names it, not "fewer than 2 tokens".
  fs::create_directory(dir + "/shards.bin");
  EXPECT_EQ(load_error("bin:" + dir + "/*.bin"), "data.source: shard '" + dir + "/shards.bin' is a directory");
}

TEST(TokenSource, ALlmcHeaderWithANegativeCountIsRefusedNotTrusted) {
  const auto dir = scratch_dir("data_negative");
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520, header[1] = 1, header[2] = -1;  // as a size_t, a count whose byte size wraps to 1022
  write_bytes(dir + "/a.bin", header.data(), 1024);
  EXPECT_EQ(load_error("bin:" + dir + "/a.bin"), "data.source: shard '" + dir + "/a.bin' is damaged: its header promises -1 tokens");
}

TEST(TokenSource, PathsAndSourcesAreEchoedPrintable) {
  EXPECT_EQ(load_error("text:/nonexistent/\x1b[2J.txt"), "data.source: text file '/nonexistent/\\x1b[2J.txt' does not exist");
  EXPECT_EQ(load_error("csv:\r"), "data.source: \"csv:\\x0d\" is not one of \"builtin\", \"text:PATH\", \"bin:GLOB\"");
}

// Every sample of a text file and of two token shards is what reading the files whole and taking
// the windows gives, windows that span two shards included.
TEST(TokenDataset, MappedSamplesAreTheWindowsOfTheFilesBytes) {
  const auto dir = scratch_dir("data_windows");
  std::mt19937 rng(3);
  std::string text(1000, '\0');
  for (auto& c : text) c = char(rng() % 256);
  write_bytes(dir + "/t.txt", text.data(), text.size());
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520, header[1] = 1, header[2] = 301;
  std::vector<uint16_t> shards(301 + 500);
  for (auto& t : shards) t = uint16_t(rng() % 50257);
  {
    std::ofstream f(dir + "/a.bin", std::ios::binary);
    f.write(reinterpret_cast<const char*>(header.data()), 1024);
    f.write(reinterpret_cast<const char*>(shards.data()), 2 * 301);
  }
  write_bytes(dir + "/b.bin", shards.data() + 301, 2 * 500);

  auto expect_windows = [](const TokenDataset& ds, const std::vector<int64_t>& tokens, const std::string& what) {
    const int64_t seq = ds.seq_len();
    for (Split split : {Split::Train, Split::Validation}) {
      const int64_t base = split == Split::Train ? 0 : ds.size(Split::Train);
      std::vector<int64_t> all(size_t(ds.size(split)));
      std::iota(all.begin(), all.end(), 0);
      const auto [x, y, images] = ds.batch(split, all);
      for (int64_t i = 0; i < ds.size(split); ++i)
        for (int64_t t = 0; t < seq; ++t) {
          ASSERT_EQ(x[i][t].item<int64_t>(), tokens[size_t((base + i) * seq + t)]) << what << " sample " << i << " token " << t;
          ASSERT_EQ(y[i][t].item<int64_t>(), tokens[size_t((base + i) * seq + t + 1)]) << what << " sample " << i << " token " << t;
        }
    }
  };
  const TokenDataset from_text(load_tokens("text:" + dir + "/t.txt").tokens, 16, 0.1, 256);
  EXPECT_EQ(from_text.size(Split::Train) + from_text.size(Split::Validation), 999 / 16);
  expect_windows(from_text, std::vector<int64_t>(reinterpret_cast<const uint8_t*>(text.data()),
                                                 reinterpret_cast<const uint8_t*>(text.data()) + text.size()), "text");
  const TokenDataset from_shards(load_tokens("bin:" + dir + "/*.bin").tokens, 16, 0.1, 50304);
  expect_windows(from_shards, std::vector<int64_t>(shards.begin(), shards.end()), "shards");
  EXPECT_THROW(TokenDataset(load_tokens("bin:" + dir + "/*.bin").tokens, 16, 0.1, 100), std::invalid_argument);
}

namespace {

int64_t resident_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return -1;
}

}  // namespace

// A text corpus used to be read whole on every rank plus 4 bytes per token: 256 MiB of text held
// 1.25 GiB. It is mapped now: building the dataset, reading samples from both ends, and the
// vocabulary check's pass over every token (vocab_size below 256) leave the rank's resident memory
// where it was, far below the corpus's size.
TEST(TokenDataset, MemoryDoesNotGrowWithTheCorpus) {
  const auto dir = scratch_dir("data_large");
  const int64_t small_bytes = 1 << 20, large_bytes = int64_t(256) << 20;
  std::string text(size_t(small_bytes), 'a');
  write_bytes(dir + "/small.txt", text.data(), text.size());
  {
    std::ofstream f(dir + "/large.txt", std::ios::binary);  // sparse: text at both ends, zeros between
    f.write(text.data(), 4096);
    f.seekp(large_bytes - 4096);
    f.write(text.data(), 4096);
  }
  ASSERT_EQ(fs::file_size(dir + "/large.txt"), uint64_t(large_bytes));
  auto growth = [&](const std::string& name, int vocab_size) {
    const int64_t before = resident_bytes();
    const TokenDataset ds(load_tokens("text:" + dir + "/" + name).tokens, 64, 0.1, vocab_size);
    ds.batch(Split::Train, {0, ds.size(Split::Train) - 1});
    ds.batch(Split::Validation, {ds.size(Split::Validation) - 1});
    return resident_bytes() - before;
  };
  const int64_t small = growth("small.txt", 256);
  for (int vocab_size : {256, 128}) {
    const int64_t large = growth("large.txt", vocab_size);
    EXPECT_LT(large, small + large_bytes / 32) << "vocab_size " << vocab_size << ": " << large << " bytes resident for a corpus of "
                                               << large_bytes << " (" << small << " for one of " << small_bytes << ")";
  }
}

// An epoch's order used to be a list of every training sample, 8 bytes each (PyTorch's randperm,
// plus the rank's copy), so a rank's memory grew with the corpus. The hashed order is computed per
// index: a stream over 32 Mi samples (256 MiB of text at seq_len 8, a sparse file) that draws at
// both ends of an epoch and restores a position holds no more than one over a small corpus.
TEST(MicroBatchStream, TheHashedOrderDoesNotGrowMemoryWithTheCorpus) {
  const auto dir = scratch_dir("data_order_memory");
  const int64_t small_bytes = 1 << 20, large_bytes = int64_t(256) << 20;
  for (const auto& [name, bytes] : {std::pair<std::string, int64_t>{"small.txt", small_bytes}, {"large.txt", large_bytes}}) {
    const int fd = ::open((dir + "/" + name).c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, bytes), 0);
    ::close(fd);
  }
  auto growth = [&](const std::string& name) {
    const int64_t before = resident_bytes();
    auto ds = std::make_shared<TokenDataset>(load_tokens("text:" + dir + "/" + name).tokens, 8, 0.0, 256);
    EXPECT_EQ(resolve_shuffle_order(std::nullopt, ds->size(Split::Train)),
              name == "large.txt" ? ShuffleOrder::Hashed : ShuffleOrder::Randperm);
    MicroBatchStream stream(ds, 1, 0, 16, 1, {true, 9, true, ShuffleOrder::Hashed});
    stream.next();
    stream.restore({1, ds->size(Split::Train) - 16});
    stream.next();  // the epoch's last micro-batch
    stream.next();  // the next epoch's first
    return resident_bytes() - before;
  };
  const int64_t small = growth("small.txt");
  const int64_t large = growth("large.txt");
  const int64_t large_samples = large_bytes / 8;
  EXPECT_LT(large, small + large_samples * 8 / 32) << large << " bytes resident for " << large_samples << " samples (" << small
                                                   << " for " << small_bytes / 8 << ")";
}
