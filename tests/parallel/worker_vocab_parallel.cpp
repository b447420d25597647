// A rank of the vocab-parallel tests, started by `dtrain launch`: the world is the tensor-parallel
// group. Every rank draws the same full logits and embedding table from one seed, computes the
// reference on them in-process (next_token_loss, at::embedding), runs the vocab-parallel version on
// its columns or rows, and compares values and gradients; exits non-zero with a message on any
// difference.
//   worker_vocab_parallel VOCAB
//
// Tolerances, per element |got - want| <= atol + rtol * |want|, model fp32 arithmetic: the two sides
// sum the same exponentials in different orders (over a rank's columns, then across ranks) and take
// log and exp of slightly different arguments, a few ulps (fp32 eps 1.2e-7) apart for the
// vocabularies here, so rtol 1e-5 (about 80 ulps) with atol 1e-7 for gradients of order 1/N that
// cancel near zero. bf16 logits are computed in fp32 on both sides; only the gradient is rounded to
// bf16, where two fp32 values a few ulps apart may round to neighbouring bf16 values, one bf16 step
// (at most 2^-7 of the value) apart: rtol 8e-3 there. A lost max all-reduce moves values by O(1); a
// lost 1/N multiplies gradients by N.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <iostream>

#include "comm/collectives.h"
#include "comm/device_mesh.h"
#include "comm/world.h"
#include "model/loss.h"
#include "parallel/tensor/vocab_parallel_cross_entropy.h"
#include "parallel/tensor/vocab_parallel_embedding.h"
#include "parallel/tensor/vocab_range.h"

using namespace dtrain;

namespace {

int failures = 0;

struct Tolerance {
  double atol, rtol;
};
constexpr Tolerance kFp32{1e-7, 1e-5};
constexpr Tolerance kBf16Grad{1e-7, 8e-3};

void fail(const std::string& what) {
  ++failures;
  std::cerr << "MISMATCH " << what << "\n";
}

void expect_close(const at::Tensor& got, const at::Tensor& want, Tolerance tol, const std::string& what) {
  if (!got.sizes().equals(want.sizes()) || got.scalar_type() != want.scalar_type()) {
    fail(what + ": got " + c10::toString(got.scalar_type()) + " " + c10::str(got.sizes()) + ", want " +
         c10::toString(want.scalar_type()) + " " + c10::str(want.sizes()));
    return;
  }
  const at::Tensor g = got.to(at::kDouble), w = want.to(at::kDouble);
  const at::Tensor excess = (g - w).abs() - (tol.atol + tol.rtol * w.abs());
  if (excess.max().item<double>() > 0) {
    const int64_t worst = excess.flatten().argmax().item<int64_t>();
    fail(what + ": element " + std::to_string(worst) + " is " + std::to_string(g.flatten()[worst].item<double>()) +
         ", want " + std::to_string(w.flatten()[worst].item<double>()));
  }
}

void expect_equal(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  if (!got.sizes().equals(want.sizes()) || !at::equal(got, want)) fail(what + ": not bit for bit equal");
}

// `g`'s recent collectives, oldest first, from this rank's collective log.
nlohmann::json history(Group& g) { return g.log().to_json().at(g.key()).at("entries"); }

// The labels of the collectives `g` has issued after its collective number `after`.
std::vector<std::string> labels_after(Group& g, int64_t after) {
  std::vector<std::string> labels;
  for (const auto& e : history(g))
    if (e.at("seq").get<int64_t>() > after) labels.push_back(e.at("label").get<std::string>());
  return labels;
}

int64_t last_seq(Group& g) {
  const nlohmann::json entries = history(g);
  return entries.empty() ? 0 : entries.back().at("seq").get<int64_t>();
}

void expect_labels(Group& g, int64_t after, const std::vector<std::string>& want, const std::string& what) {
  const std::vector<std::string> got = labels_after(g, after);
  if (got != want) {
    std::string listed;
    for (const auto& l : got) listed += " '" + l + "'";
    fail(what + ": collectives issued:" + (listed.empty() ? " none" : listed));
  }
}

at::Generator seeded(uint64_t seed) { return at::detail::createCPUGenerator(seed); }

// Logits of spread 4, so that each rank's columns have a different maximum.
at::Tensor full_logits(int64_t vocab, at::ScalarType dtype) {
  return (at::randn({2, 5, vocab}, seeded(1)) * 4).to(dtype);
}

// Every column is some token's target, most several tokens'.
at::Tensor targets_for(int64_t vocab) { return (at::arange(10, at::kLong) * 3).remainder(vocab).view({2, 5}); }

// With `ignored`, two tokens' targets are -100 (prompt or image positions): they take no loss and
// their logits no gradient, and the mean is over the other eight.
void check_cross_entropy(const std::shared_ptr<Group>& g, int64_t vocab, at::ScalarType dtype, bool ignored) {
  const std::string where = "cross-entropy " + std::string(c10::toString(dtype)) + " vocab " + std::to_string(vocab) +
                            (ignored ? " with ignored targets" : "") + " over " + std::to_string(g->size()) + " ranks, rank " +
                            std::to_string(g->rank());
  const auto [begin, end] = vocab_range(vocab, g->size(), g->rank());
  at::Tensor targets = targets_for(vocab);
  if (ignored) targets.view({-1}).index_fill_(0, at::tensor({1, 6}, at::kLong), -100);

  at::Tensor full = full_logits(vocab, dtype).requires_grad_();
  const at::Tensor want = next_token_loss(full, targets);
  want.backward();

  at::Tensor local = full.detach().slice(2, begin, end).clone().requires_grad_();
  const int64_t before = last_seq(*g);
  const at::Tensor got = vocab_parallel_cross_entropy(local, targets, begin, g);
  expect_labels(*g, before,
                {"vocab_parallel_cross_entropy max", "vocab_parallel_cross_entropy sum-exp and target logit"},
                where + " forward");
  got.backward();
  expect_labels(*g, before,
                {"vocab_parallel_cross_entropy max", "vocab_parallel_cross_entropy sum-exp and target logit"},
                where + " backward adds no collective");

  expect_close(got, want, kFp32, where + " value");
  expect_close(local.grad(), full.grad().slice(2, begin, end), dtype == at::kFloat ? kFp32 : kBf16Grad,
               where + " gradient of the local logits");
  // Every rank returns the same loss, bit for bit.
  const at::Tensor losses = all_gather(*g, got.detach().reshape({1}), "losses");
  expect_equal(losses, losses[0].expand({g->size()}), where + " loss the same on every rank");
}

void check_embedding(const std::shared_ptr<Group>& g, int64_t vocab) {
  const std::string where = "embedding vocab " + std::to_string(vocab) + " over " + std::to_string(g->size()) +
                            " ranks, rank " + std::to_string(g->rank());
  const auto [begin, end] = vocab_range(vocab, g->size(), g->rank());
  const at::Tensor tokens = targets_for(vocab);
  const at::Tensor probe = at::randn({2, 5, 4}, seeded(3));  // the loss weighs each output element differently

  at::Tensor full = at::randn({vocab, 4}, seeded(2)).requires_grad_();
  const at::Tensor want = at::embedding(full, tokens);
  (want * probe).sum().backward();

  at::Tensor local = full.detach().slice(0, begin, end).clone().requires_grad_();
  const int64_t before = last_seq(*g);
  const at::Tensor got = vocab_parallel_embedding(local, tokens, begin, g);
  const std::vector<std::string> one_all_reduce =
      g->size() == 1 ? std::vector<std::string>{} : std::vector<std::string>{"reduce_from_group forward"};
  expect_labels(*g, before, one_all_reduce, where + " forward");
  (got * probe).sum().backward();
  expect_labels(*g, before, one_all_reduce, where + " backward adds no collective");

  expect_close(got, want.detach(), kFp32, where + " output");
  expect_close(local.grad(), full.grad().slice(0, begin, end), kFp32, where + " gradient of the local rows");
}

// A group of one: the cross-entropy is next_token_loss itself and the embedding at::embedding, bit for bit.
void check_group_of_one(const std::shared_ptr<Group>& one, int64_t vocab) {
  const at::Tensor targets = targets_for(vocab);
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    const std::string where = "group of one, " + std::string(c10::toString(dtype));
    at::Tensor a = full_logits(vocab, dtype).requires_grad_(), b = a.detach().clone().requires_grad_();
    const at::Tensor got = vocab_parallel_cross_entropy(a, targets, 0, one), want = next_token_loss(b, targets);
    got.backward();
    want.backward();
    expect_equal(got, want, where + " cross-entropy value");
    expect_equal(a.grad(), b.grad(), where + " cross-entropy gradient");
  }
  const at::Tensor table = at::randn({vocab, 4}, seeded(2));
  expect_equal(vocab_parallel_embedding(table, targets, 0, one), at::embedding(table, targets), "group of one embedding");
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  try {
    if (argc != 2) throw std::invalid_argument("usage: worker_vocab_parallel VOCAB");
    const int64_t vocab = std::stoll(argv[1]);
    auto world = World::init(WorldOptions{}, derive_worker_env(current_env()));
    const DeviceMesh mesh(*world, {{"dp_shard", -1}, {"tp", 1}});
    for (auto dtype : {at::kFloat, at::kBFloat16})
      for (const bool ignored : {false, true}) check_cross_entropy(world->world_group(), vocab, dtype, ignored);
    check_embedding(world->world_group(), vocab);
    check_group_of_one(mesh.group("tp"), vocab);
  } catch (const std::exception& e) {
    std::cerr << "ERROR " << e.what() << "\n";
    return 1;
  }
  if (failures) return 1;
  std::cout << "PASS vocab_parallel\n";
  return 0;
}
