// A rank of the context-attention tests, started by `dtrain launch`: the world is the cp group.
// Every rank draws the same whole q, k, v and output gradient from one seed, computes the reference
// in-process (the fp64 formula of attention_reference.h), takes its layout's tokens, runs
// ring_attention or ulysses_attention on them, and compares the output and the gradients of its own
// tokens; exits non-zero with a message on any difference. Also a group of one, and Ulysses' refusal
// of heads that do not divide by cp, and the messages a ring pass sends.
//   worker_context_attention
//
// Tolerances, per element |got - want| <= atol + rtol * |want|. fp32 inputs model fp32 arithmetic:
// outputs are softmax-weighted averages of at most 40 randn values, computed by the fused kernel and
// merged over at most 4 blocks (each merge an exp, a multiply and an add in fp32, eps 1.2e-7); the
// gradients add up to 4 blocks' shares in fp32. The error is some ulps of the largest term (values of
// order 1, a few at most; up to 8e-7 seen): atol 2e-6, rtol 1e-5. bf16 inputs are compared with the
// fp64 formula of the same bf16 values; the kernel rounds each block's output and gradients to bf16
// (unit roundoff 2^-8 = 3.9e-3) before the fp32 merge, and the result is rounded again: a few
// roundings of terms up to about 3 (up to 2e-2 seen where |want| is largest), so atol 2e-2 with rtol
// 1e-2. A merge without the log-sum-exp rescaling, or a block masked at local instead of global
// positions, is off by O(1) (0.1 and more).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <iostream>

#include "attention_reference.h"
#include "comm/device_mesh.h"
#include "comm/world.h"
#include "parallel/context/ring_attention.h"
#include "parallel/context/ulysses_attention.h"

using namespace dtrain;
using dtrain::test::close_or_worst;
using dtrain::test::reference_attention;

namespace {

int failures = 0;

struct Tolerance {
  double atol, rtol;
};
constexpr Tolerance kFp32{2e-6, 1e-5};
constexpr Tolerance kBf16{2e-2, 1e-2};

void expect_close(const at::Tensor& got, const at::Tensor& want, at::ScalarType dtype, const std::string& what) {
  if (got.scalar_type() != dtype) {
    ++failures;
    std::cerr << "MISMATCH " << what << ": dtype " << c10::toString(got.scalar_type()) << ", want " << c10::toString(dtype) << "\n";
    return;
  }
  const Tolerance tol = dtype == at::kFloat ? kFp32 : kBf16;
  const std::string worst = close_or_worst(got, want, tol.atol, tol.rtol);
  if (worst.empty()) return;
  ++failures;
  std::cerr << "MISMATCH " << what << ": " << worst << "\n";
}

enum class Impl { Ring, Ulysses };

struct Case {
  Impl impl;
  int64_t chunk_len, heads, kv_heads;
  bool causal, zigzag;
  at::ScalarType dtype = at::kFloat;

  std::string name(int cp) const {
    return std::string(impl == Impl::Ring ? "ring" : "ulysses") + " cp " + std::to_string(cp) + (causal ? " causal" : " full") +
           (zigzag ? " zigzag" : " contiguous") + " chunk " + std::to_string(chunk_len) + " H " + std::to_string(heads) + " KV " +
           std::to_string(kv_heads) + " " + c10::toString(dtype);
  }
};

at::Tensor draw(std::vector<int64_t> shape, uint64_t seed, at::ScalarType dtype) {
  return at::randn(shape, at::detail::createCPUGenerator(seed)).to(dtype);
}

void check(const std::shared_ptr<Group>& g, const Case& c) {
  const int cp = g->size();
  const std::string where = c.name(cp) + ", rank " + std::to_string(g->rank());
  const SequenceLayout layout = SequenceLayout::make(c.chunk_len * (c.zigzag ? 2 * cp : cp), cp, g->rank(), c.zigzag);
  const int64_t b = 2, t = layout.seq_len, hd = 8;
  const at::Tensor q = draw({b, c.heads, t, hd}, 1, c.dtype), k = draw({b, c.kv_heads, t, hd}, 2, c.dtype),
                   v = draw({b, c.kv_heads, t, hd}, 3, c.dtype), dout = draw({b, c.heads, t, hd}, 4, c.dtype);
  const test::AttentionReference want = reference_attention(q, k, v, dout, c.causal);

  at::Tensor lq = layout.take(q, 2).requires_grad_(), lk = layout.take(k, 2).requires_grad_(),
             lv = layout.take(v, 2).requires_grad_();
  const at::Tensor out =
      c.impl == Impl::Ring ? ring_attention(lq, lk, lv, g, layout, c.causal) : ulysses_attention(lq, lk, lv, g, c.causal);
  out.backward(layout.take(dout, 2));
  expect_close(out, layout.take(want.out, 2), c.dtype, where + " output");
  expect_close(lq.grad(), layout.take(want.dq, 2), c.dtype, where + " dq");
  expect_close(lk.grad(), layout.take(want.dk, 2), c.dtype, where + " dk");
  expect_close(lv.grad(), layout.take(want.dv, 2), c.dtype, where + " dv");
}

std::vector<Case> cases_for(int cp) {
  std::vector<Case> cases;
  for (int64_t chunk : {3, 5})
    for (bool causal : {true, false})
      for (auto [heads, kv] : {std::pair<int64_t, int64_t>{4, 2}, {4, 4}}) cases.push_back({Impl::Ring, chunk, heads, kv, causal, causal});
  // Ring attention takes any layout: causal over contiguous chunks, full attention over zigzag ones.
  cases.push_back({Impl::Ring, 3, 4, 2, true, false});
  cases.push_back({Impl::Ring, 5, 4, 2, false, true});
  cases.push_back({Impl::Ring, 3, 4, 2, true, true, at::kBFloat16});
  cases.push_back({Impl::Ring, 5, 4, 4, false, false, at::kBFloat16});
  for (bool causal : {true, false}) {
    cases.push_back({Impl::Ulysses, 3, 8, 4, causal, false});
    cases.push_back({Impl::Ulysses, 5, 4, 4, causal, false});
    if (cp == 2) cases.push_back({Impl::Ulysses, 3, 4, 2, causal, false});
  }
  cases.push_back({Impl::Ulysses, 3, 8, 4, true, false, at::kBFloat16});
  return cases;
}

// The point-to-point messages of one ring attention's forward and backward, from this rank's collective
// log, oldest first: k/v packed as [2, B, KV, T_local, hd] (the KV heads, not the H query heads) and
// cp-1 hops of them each way; the fp32 dk/dv accumulators cp hops, the last one home.
void check_ring_messages(const std::shared_ptr<Group>& g) {
  const int cp = g->size(), next = (g->rank() + 1) % cp, prev = (g->rank() + cp - 1) % cp;
  const SequenceLayout layout = SequenceLayout::make(4 * cp * 3, cp, g->rank(), true);
  at::Tensor q = at::randn({2, 4, layout.local_len(), 8}).requires_grad_(), kv = at::randn({2, 2, layout.local_len(), 8});
  ring_attention(q, kv, kv, g, layout, true).sum().backward();

  std::vector<std::string> want;
  const std::string shape = " [2,2,2," + std::to_string(layout.local_len()) + ",8] float32 '";
  const auto hop = [&](const std::string& label) {
    want.push_back("send->" + std::to_string(next) + shape + label + "'");
    want.push_back("recv<-" + std::to_string(prev) + shape + label + "'");
  };
  for (int step = 0; step + 1 < cp; ++step) hop("ring attention k/v step " + std::to_string(step));
  for (int step = 0; step < cp; ++step) {
    if (step + 1 < cp) hop("ring attention backward k/v step " + std::to_string(step));
    hop("ring attention dk/dv step " + std::to_string(step));
  }
  const nlohmann::json entries = g->log().to_json().at(g->key()).at("entries");
  std::vector<std::string> got;
  for (size_t i = entries.size() - std::min(entries.size(), want.size()); i < entries.size(); ++i)
    got.push_back(record_from_json(entries[i]).describe());
  if (got == want) return;
  ++failures;
  std::cerr << "MISMATCH ring messages over cp " << cp << ", rank " << g->rank() << ": the last " << want.size() << " were\n";
  for (const auto& m : got) std::cerr << "  " << m << "\n";
}

void expect_refused(const std::function<void()>& f, const std::string& want, const std::string& what) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).find(want) != std::string::npos) return;
    ++failures;
    std::cerr << "MISMATCH " << what << ": error '" << e.what() << "', want '" << want << "'\n";
    return;
  }
  ++failures;
  std::cerr << "MISMATCH " << what << ": no error, want '" << want << "'\n";
}

// Checked before any communication, so every rank refuses alike.
void check_ulysses_refusals(const std::shared_ptr<Group>& g) {
  const int cp = g->size();
  const at::Tensor odd_heads = at::zeros({1, 2 * cp + 1, 3, 8}), heads = at::zeros({1, 2 * cp, 3, 8}), one_head = at::zeros({1, 1, 3, 8});
  expect_refused([&] { ulysses_attention(odd_heads, heads, heads, g, true); },
                 "model.n_head " + std::to_string(2 * cp + 1) + " is not divisible by parallel.cp " + std::to_string(cp), "Ulysses n_head");
  expect_refused([&] { ulysses_attention(heads, one_head, one_head, g, true); },
                 "model.n_kv_head 1 is not divisible by parallel.cp " + std::to_string(cp), "Ulysses n_kv_head");
}

}  // namespace

int main() {
  at::set_num_threads(1);
  try {
    auto world = World::init(WorldOptions{}, derive_worker_env(current_env()));
    const std::shared_ptr<Group> cp_group = world->world_group();
    check_ring_messages(cp_group);
    for (const Case& c : cases_for(cp_group->size())) check(cp_group, c);
    check_ulysses_refusals(cp_group);
    const DeviceMesh mesh(*world, {{"dp_shard", -1}, {"cp", 1}});
    for (const Case& c : {Case{Impl::Ring, 3, 4, 2, true, true}, Case{Impl::Ring, 5, 4, 4, false, false},
                          Case{Impl::Ulysses, 3, 4, 2, true, false}})
      check(mesh.group("cp"), c);
  } catch (const std::exception& e) {
    std::cerr << "ERROR " << e.what() << "\n";
    return 1;
  }
  if (failures) return 1;
  std::cout << "PASS context_attention\n";
  return 0;
}
