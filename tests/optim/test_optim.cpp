#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <cmath>

#include "optim/adamw.h"
#include "optim/flat_optimizer.h"
#include "optim/flat_parameters.h"
#include "optim/fused_squares.h"
#include "optim/grad_clip.h"
#include "optim/lr_schedule.h"

using namespace dtrain;
using json = nlohmann::json;

namespace {

std::vector<std::pair<std::string, at::Tensor>> make_params(uint64_t seed) {
  torch::manual_seed(seed);
  return {{"w", torch::randn({4, 3}).requires_grad_()},
          {"b", torch::randn({3}).requires_grad_()},
          {"frozen", torch::randn({2})},
          {"v", torch::randn({5, 2}).requires_grad_()}};
}

}  // namespace

TEST(FlatParameters, ParametersBecomeViewsAndBackwardAccumulatesIntoTheFlatGradient) {
  auto named = make_params(0);
  const auto w0 = named[0].second.detach().clone();
  FlatParameters flat(named);
  ASSERT_EQ(flat.entries().size(), 3u);
  EXPECT_EQ(flat.entries().front().name, "v");  // reverse registration order
  EXPECT_EQ(flat.numel(), 12 + 3 + 10);
  EXPECT_TRUE(torch::equal(named[0].second, w0));
  auto loss = (named[0].second.sum() * 2) + named[1].second.sum() + named[3].second.pow(2).sum();
  loss.backward();
  const auto& e = flat.entries()[2];  // "w"
  EXPECT_TRUE(torch::equal(flat.grad().narrow(0, e.offset, e.numel), torch::full({12}, 2.0)));
  flat.data().add_(1.0);
  EXPECT_TRUE(torch::allclose(named[0].second, w0 + 1));
  EXPECT_EQ(flat.decay_spans(), (Spans{{0, 10}, {13, 12}}));  // v and w decay; the bias between them does not
}

// torch.optim.AdamW's single-tensor update, tensor by tensor.
TEST(AdamW, MatchesAPerTensorReferenceIncludingDecayMask) {
  auto named = make_params(1);
  auto reference = make_params(1);
  FlatParameters flat(named);
  const double lr = 0.01, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
  auto opt = make_flat_optimizer({{"type", "AdamW"}, {"params", {{"lr", lr}, {"betas", {b1, b2}}, {"eps", eps}, {"weight_decay", wd}}}},
                                 flat.data());
  std::map<std::string, std::pair<at::Tensor, at::Tensor>> moments;
  for (int step = 1; step <= 5; ++step) {
    torch::manual_seed(100 + step);
    for (auto& e : flat.entries()) e.param.mutable_grad().copy_(torch::randn(e.param.sizes()));
    for (auto& [name, p] : reference) {
      if (!p.requires_grad()) continue;
      const auto& e = *std::find_if(flat.entries().begin(), flat.entries().end(), [&](const FlatEntry& x) { return x.name == name; });
      at::NoGradGuard no_grad;
      auto g = e.param.grad();
      auto& [m, v] = moments[name];
      if (!m.defined()) m = torch::zeros_like(p), v = torch::zeros_like(p);
      if (p.dim() >= 2) p.mul_(1 - lr * wd);
      m.mul_(b1).add_(g, 1 - b1);
      v.mul_(b2).addcmul_(g, g, 1 - b2);
      const double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
      p.addcdiv_(m, (v.sqrt() / std::sqrt(bc2)).add_(eps), -lr / bc1);
    }
    opt->step(flat.data(), flat.grad(), flat.decay_spans(), lr, {});
  }
  for (size_t i = 0; i < named.size(); ++i)
    EXPECT_TRUE(torch::allclose(named[i].second, reference[i].second, 1e-6, 1e-7)) << named[i].first;
}

// ZeRO updates the scattered pieces a rank owns with state kept elsewhere: pieces whose state sits
// in another order must update exactly like the whole buffer, also across AdamW's denominator
// chunks (the buffer is longer than one).
// AdamW's two paths: the fused pass (contiguous fp32 on the CPU) and ATen's operations (every other
// device and layout, here reached through a strided view of the same values) make the same update,
// weight decay on the same spans, within fp32 rounding (ATen's kernels may contract into
// multiply-adds), over more than one of the ATen path's denominator chunks.
TEST(AdamW, TheFusedPassAndAtenOperationsUpdateAlike) {
  const int64_t n = (1 << 20) + 777;
  const Spans decay = {{0, 1000}, {5000, n - 6000}};
  torch::manual_seed(11);
  const at::Tensor start = torch::randn({n});
  at::Tensor fused = start.clone();
  at::Tensor strided_storage = torch::zeros({2 * n});
  at::Tensor strided = strided_storage.slice(0, 0, 2 * n, 2);  // every other element: not contiguous
  strided.copy_(start);
  ASSERT_FALSE(strided.is_contiguous());
  const nlohmann::json spec = {{"type", "AdamW"}, {"params", {{"lr", 0.01}, {"weight_decay", 0.1}}}};
  auto a = make_flat_optimizer(spec, fused), b = make_flat_optimizer(spec, fused);
  for (int step = 0; step < 3; ++step) {
    const at::Tensor g = torch::randn({n});
    a->step(fused, g, decay, 0.01, {});
    b->step(strided, g, decay, 0.01, {});
  }
  EXPECT_TRUE(torch::allclose(fused, strided, 1e-6, 1e-7)) << (fused - strided).abs().max().item<double>();
  EXPECT_FALSE(torch::equal(fused, start));
  // The moments are sums of gradients of either sign, so an element can sit near zero: besides a few
  // ulps of its own size, each may differ by a few ulps of the gradients' size (~1, exp_avg_sq's ~1).
  for (const auto& [name, t] : a->state())
    EXPECT_TRUE(torch::allclose(t, b->state().at(name), 1e-6, 1e-6)) << name << ": " << (t - b->state().at(name)).abs().max().item<double>();
}

// The multi-tensor kernel an accelerator's fp32 buffers take (adamw_multi_tensor), run here on the
// CPU, where ATen has the same kernel: scattered pieces with their state elsewhere, weight decay on
// their spans alone, the clipping factor and the zeroing, against the fused pass on the whole
// buffer, within fp32 rounding. Dropping the decay group or the scale moves elements by ~lr.
TEST(AdamW, TheMultiTensorKernelUpdatesPiecesLikeTheFusedPass) {
  const int64_t n = 10000;
  const Spans decay = {{0, 1000}, {5000, 3000}};
  torch::manual_seed(12);
  const at::Tensor start = torch::randn({n});
  at::Tensor whole = start.clone(), pieces = start.clone();
  const nlohmann::json spec = {{"type", "AdamW"}, {"params", {{"lr", 0.01}, {"weight_decay", 0.1}}}};
  auto reference = make_flat_optimizer(spec, whole);
  const AdamWOptions options{0.01, 0.9, 0.999, 1e-8, 0.1};
  // Two pieces in reverse order in the state: [6000, n) first, then [0, 6000).
  const std::vector<at::Tensor> state = {torch::zeros({n}), torch::zeros({n})};
  for (int step = 1; step <= 3; ++step) {
    const at::Tensor g = torch::randn({n});
    at::Tensor g_whole = g.clone(), g_pieces = g.clone();
    reference->step(whole, g_whole, decay, 0.01, {0.5, true});
    const std::vector<StatePiece> ps = {{pieces.narrow(0, 6000, n - 6000), g_pieces.narrow(0, 6000, n - 6000), {{0, 2000}}, 0},
                                        {pieces.narrow(0, 0, 6000), g_pieces.narrow(0, 0, 6000), {{0, 1000}, {5000, 1000}}, n - 6000}};
    adamw_multi_tensor(options, ps, state, step, 0.01, {0.5, true});
    EXPECT_TRUE(torch::equal(g_pieces, torch::zeros({n})));
  }
  EXPECT_TRUE(torch::allclose(pieces, whole, 1e-6, 1e-7)) << (pieces - whole).abs().max().item<double>();
  EXPECT_GT((pieces - start).abs().max().item<double>(), 0.01);
  const at::Tensor m = torch::cat({state[0].narrow(0, n - 6000, 6000), state[0].narrow(0, 0, n - 6000)});
  EXPECT_TRUE(torch::allclose(m, reference->state().at("exp_avg"), 1e-6, 1e-6));
}

TEST(ElementwiseOptimizer, PiecesWithTheirStateAnywhereUpdateLikeTheWhole) {
  const int64_t n = (1 << 20) + 3001, a = 1000;
  for (const nlohmann::json spec : {nlohmann::json{{"type", "AdamW"}}, nlohmann::json{{"type", "SGD"}, {"params", {{"momentum", 0.9}, {"weight_decay", 0.1}}}}}) {
    torch::manual_seed(3);
    at::Tensor whole = torch::randn({n}), pieces = whole.clone();
    const Spans decay = {{0, 500}, {700, 301}, {1001, 5}, {2000, n - 2050}};
    auto a_opt = make_flat_optimizer(spec, whole), b_opt = make_flat_optimizer(spec, pieces);
    for (int step = 0; step < 3; ++step) {
      const at::Tensor g = torch::randn({n});
      a_opt->step(whole, g, decay, 0.01, {});
      // The first a elements keep their state at the end, the rest at the start: a rotation.
      b_opt->step_pieces({{pieces.narrow(0, 0, a), g.narrow(0, 0, a), spans_within(decay, 0, a), n - a},
                          {pieces.narrow(0, a, n - a), g.narrow(0, a, n - a), spans_within(decay, a, n - a), 0}},
                         0.01, {});
    }
    EXPECT_TRUE(torch::equal(whole, pieces)) << spec.dump();
    for (const auto& [name, t] : a_opt->state()) {
      if (t.dim() == 0) {
        EXPECT_TRUE(torch::equal(t, b_opt->state().at(name))) << name;
        continue;
      }
      EXPECT_TRUE(torch::equal(torch::roll(t, -a), b_opt->state().at(name))) << spec.dump() << " " << name;
    }
  }
}

TEST(DecaySpans, ClippedToARangeAndMadeRelativeToIt) {
  const Spans spans = {{0, 10}, {13, 12}, {40, 5}};
  EXPECT_EQ(spans_within(spans, 0, 100), spans);
  EXPECT_EQ(spans_within(spans, 5, 20), (Spans{{0, 5}, {8, 12}}));
  EXPECT_EQ(spans_within(spans, 25, 15), Spans{});
  EXPECT_EQ(spans_within(spans, 42, 1), (Spans{{0, 1}}));
}

TEST(Sgd, MomentumAndNesterovMatchTheReference) {
  for (bool nesterov : {false, true}) {
    auto p = torch::tensor({1.0, -2.0});
    auto opt = make_flat_optimizer({{"type", "SGD"}, {"params", {{"lr", 0.1}, {"momentum", 0.9}, {"nesterov", nesterov}}}}, p);
    auto ref = p.clone(), buf = torch::zeros({2});
    for (int step = 0; step < 4; ++step) {
      auto g = torch::tensor({0.5 * (step + 1), -1.0});
      buf = step == 0 ? g.clone() : buf * 0.9 + g;
      ref -= 0.1 * (nesterov ? g + 0.9 * buf : buf);
      opt->step(p, g, Spans{{0, 2}}, 0.1, {});
    }
    EXPECT_TRUE(torch::allclose(p, ref, 1e-6, 1e-7)) << "nesterov=" << nesterov;
  }
}

TEST(FlatOptimizer, BadParamsNameTheKey) {
  auto like = torch::zeros({1});
  auto expect_error = [&](const json& spec, const std::string& needle) {
    try {
      make_flat_optimizer(spec, like);
      ADD_FAILURE() << "no error for " << spec.dump();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error({{"type", "Lion"}}, "optimizer.type");
  expect_error({{"type", "AdamW"}, {"params", {{"lr", -1}}}}, "optimizer.params.lr");
  expect_error({{"type", "AdamW"}, {"params", {{"momentum", 0.9}}}}, "optimizer.params.momentum");
  expect_error({{"type", "AdamW"}, {"params", {{"betas", {0.9}}}}}, "optimizer.params.betas");
}

TEST(OptimizerState, RoundTripsAndRejectsAnotherModelSize) {
  auto p = torch::randn({6});
  auto opt = make_flat_optimizer({{"type", "AdamW"}}, p);
  opt->step(p, torch::ones({6}), Spans{{0, 6}}, 0.1, {});
  auto restored = make_flat_optimizer({{"type", "AdamW"}}, p);
  restored->load_state(opt->state());
  EXPECT_TRUE(torch::equal(restored->state().at("exp_avg"), opt->state().at("exp_avg")));
  EXPECT_EQ(restored->state().at("step").item<int64_t>(), 1);
  auto other = make_flat_optimizer({{"type", "AdamW"}}, torch::zeros({3}));
  EXPECT_THROW(other->load_state(opt->state()), std::runtime_error);
}

TEST(LrSchedule, DtrainSchedulesAtKnownSteps) {
  const json cosine = {{"type", "cosine"}, {"params", {{"warmup_steps", 10}, {"min_ratio", 0.1}}}};
  LrSchedule c(cosine, 1.0, 110);
  EXPECT_NEAR(c.lr(0), 1.0 / 11, 1e-12);
  EXPECT_NEAR(c.lr(9), 10.0 / 11, 1e-12);
  EXPECT_NEAR(c.lr(10), 1.0, 1e-12);
  EXPECT_NEAR(c.lr(10 + 33), 0.1 + 0.9 * 0.75, 1e-12);  // a third of the way: cos(pi/3) = 1/2
  EXPECT_NEAR(c.lr(109), 0.1, 1e-12);
  LrSchedule linear({{"type", "linear"}, {"params", {{"min_ratio", 0.0}}}}, 2.0, 11);
  EXPECT_NEAR(linear.lr(0), 2.0, 1e-12);
  EXPECT_NEAR(linear.lr(5), 1.0, 1e-12);
  EXPECT_NEAR(linear.lr(10), 0.0, 1e-12);
  LrSchedule wsd({{"type", "wsd"}, {"params", {{"warmup_steps", 2}, {"decay_steps", 4}, {"min_ratio", 0.0}}}}, 1.0, 20);
  EXPECT_NEAR(wsd.lr(1), 2.0 / 3, 1e-12);
  EXPECT_NEAR(wsd.lr(15), 1.0, 1e-12);  // stable until the last 4 steps
  EXPECT_NEAR(wsd.lr(16), 0.75, 1e-12);
  EXPECT_NEAR(wsd.lr(19), 0.0, 1e-12);
  EXPECT_NEAR(LrSchedule({{"type", "constant"}}, 0.3, 5).lr(4), 0.3, 1e-12);
}

TEST(LrSchedule, DeepSpeedSchedulesFollowTheirFormulas) {
  LrSchedule warm({{"type", "WarmupLR"}, {"params", {{"warmup_min_lr", 0.0}, {"warmup_max_lr", 0.01}, {"warmup_num_steps", 100}}}}, 1.0, 1000);
  EXPECT_NEAR(warm.lr(0), 0.0, 1e-12);  // log(1) = 0
  EXPECT_NEAR(warm.lr(9), 0.01 * std::log(10.0) / std::log(100.0), 1e-12);
  EXPECT_NEAR(warm.lr(500), 0.01, 1e-12);
  LrSchedule lin({{"type", "WarmupLR"}, {"params", {{"warmup_max_lr", 0.01}, {"warmup_num_steps", 100}, {"warmup_type", "linear"}}}}, 1.0, 1000);
  EXPECT_NEAR(lin.lr(50), 0.005, 1e-12);
  LrSchedule decay({{"type", "WarmupDecayLR"},
                    {"params", {{"warmup_max_lr", 0.01}, {"warmup_num_steps", 100}, {"total_num_steps", 1100}, {"warmup_type", "linear"}}}},
                   1.0, 0);
  EXPECT_NEAR(decay.lr(600), 0.01 * 500.0 / 1000.0, 1e-12);
  EXPECT_NEAR(decay.lr(1100), 0.0, 1e-12);
  LrSchedule cos({{"type", "WarmupCosineLR"},
                  {"params", {{"total_num_steps", 1100}, {"warmup_num_steps", 100}, {"cos_min_ratio", 0.1}, {"warmup_type", "linear"}}}},
                 0.5, 0);
  EXPECT_NEAR(cos.lr(50), 0.25, 1e-12);
  EXPECT_NEAR(cos.lr(599), 0.5 * (0.1 + 0.9 * 0.5), 1e-12);  // progress 500/1000
  EXPECT_NEAR(cos.lr(1099), 0.5 * 0.1, 1e-12);
  EXPECT_THROW(LrSchedule({{"type", "OneCycle"}}, 1.0, 10), std::invalid_argument);
  EXPECT_THROW(LrSchedule({{"type", "cosine"}, {"params", {{"warmup", 3}}}}, 1.0, 10), std::invalid_argument);
}

TEST(GradClip, NormMatchesADirectComputationAndClipsToMax) {
  const auto g = torch::tensor({3.0f, 4.0f, 0.0f, 12.0f});
  EXPECT_NEAR(global_grad_norm(g), 13.0, 1e-12);
  EXPECT_NEAR(clip_factor(13.0, 1.3), 1.3 / (13.0 + 1e-6), 1e-15);
  EXPECT_EQ(clip_factor(1.2, 1.3), 1.0);  // within the bound: unclipped
  EXPECT_EQ(clip_factor(13.0, 0), 1.0);   // gradient_clipping 0 disables it
}

// The one-pass fp64 norm of contiguous CPU fp32 and ATen's (reached through a strided view of the
// same values) against a long double sum, with a run of elements left out. Both sum exact squares
// of fp32 values in fp64, in other orders: the one pass adds at most ~4.1e3 terms in a chain (a
// lane's 4096 of a block, the 16 lanes, the blocks), so its relative error is below
// 4.1e3 · 2^-53 ≈ 4.6e-13; 1e-12 is asked of both. Its bits do not depend on the thread count.
TEST(GradClip, TheOnePassNormMatchesAtenAndALongDoubleSum) {
  const int64_t n = 3 * (int64_t(1) << 16) + 12345;  // blocks and a tail that is no multiple of the lanes
  torch::manual_seed(21);
  const at::Tensor g = torch::randn({n}) * torch::rand({n}).mul_(8).exp_();  // magnitudes over ~3 decades
  at::Tensor strided_storage = torch::zeros({2 * n});
  at::Tensor strided = strided_storage.slice(0, 0, 2 * n, 2);
  strided.copy_(g);
  const StageElements stages{Spans{{1000, 5000}, {n - 7, 3}}, nullptr};
  long double sum = 0;
  const float* x = g.const_data_ptr<float>();
  for (int64_t i = 0; i < n; ++i)
    if (!(i >= 1000 && i < 6000) && !(i >= n - 7 && i < n - 4)) sum += (long double)x[i] * x[i];
  const double expected = std::sqrt(double(sum));
  const double fused = global_grad_norm(g, nullptr, {}, stages), aten = global_grad_norm(strided, nullptr, {}, stages);
  EXPECT_NEAR(fused, expected, 1e-12 * expected);
  EXPECT_NEAR(aten, expected, 1e-12 * expected);
  EXPECT_NEAR(fused_sum_of_squares(x + 5, 17), double(g.narrow(0, 5, 17).to(at::kDouble).square().sum().item<double>()), 1e-9);
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const double one_thread = global_grad_norm(g, nullptr, {}, stages);
  at::set_num_threads(threads);
  EXPECT_EQ(one_thread, fused);
}

// The clipping factor applied as AdamW's fused pass reads each gradient rounds as clipping the
// buffer first (an fp32 product each way), so the update is the same bit for bit; ATen's path and
// SGD scale the gradients in place first. A factor that changes from step to step, as a norm's does,
// so that AdamW's near-invariance to a constant scale cannot hide a dropped factor.
TEST(GradClip, TheFactorAppliedInTheUpdateMatchesClippingFirst) {
  const int64_t n = (1 << 16) + 999;
  const Spans decay = {{0, 1000}, {5000, n - 6000}};
  const double factors[] = {0.3, 1.0, 0.05, 0.7};
  for (const nlohmann::json& spec : {nlohmann::json{{"type", "AdamW"}, {"params", {{"lr", 0.01}, {"weight_decay", 0.1}}}},
                                    nlohmann::json{{"type", "SGD"}, {"params", {{"momentum", 0.9}, {"weight_decay", 0.1}}}}})
    for (const bool contiguous : {true, false}) {
      torch::manual_seed(31);
      const at::Tensor start = torch::randn({n});
      auto laid_out = [&] {  // every other element of a buffer twice the size: not contiguous, so ATen's path
        return contiguous ? start.clone() : torch::zeros({2 * n}).slice(0, 0, 2 * n, 2).copy_(start);
      };
      at::Tensor folded = laid_out(), clipped_first = laid_out(), unclipped = laid_out();
      auto a = make_flat_optimizer(spec, start), b = make_flat_optimizer(spec, start), c = make_flat_optimizer(spec, start);
      for (double factor : factors) {
        const at::Tensor g = torch::randn({n});
        at::Tensor clipped = g.clone().mul_(factor);
        a->step(folded, g.clone(), decay, 0.01, {factor});
        b->step(clipped_first, clipped, decay, 0.01, {});
        c->step(unclipped, g.clone(), decay, 0.01, {});
      }
      const std::string what = spec.dump() + (contiguous ? " fused" : " ATen");
      EXPECT_TRUE(torch::equal(folded, clipped_first)) << what << ": " << (folded - clipped_first).abs().max().item<double>();
      for (const auto& [name, t] : a->state()) EXPECT_TRUE(torch::equal(t, b->state().at(name))) << what << " " << name;
      EXPECT_FALSE(torch::equal(folded, unclipped)) << what;
    }
}

// An update asked to leave the gradients zero updates exactly as one that is not (the fused pass
// writes each 0 after reading it; ATen's path and SGD zero in a pass after), on every path, and
// zeroes the pieces' gradients only: a ZeRO rank's other elements are another rank's to clear.
TEST(ElementwiseOptimizer, ZeroingTheGradientsInTheUpdateChangesNothingElse) {
  const int64_t n = (1 << 16) + 999, a = 3001;
  const Spans decay = {{0, 1000}, {5000, n - 6000}};
  for (const nlohmann::json& spec : {nlohmann::json{{"type", "AdamW"}, {"params", {{"lr", 0.01}, {"weight_decay", 0.1}}}},
                                     nlohmann::json{{"type", "SGD"}, {"params", {{"momentum", 0.9}, {"weight_decay", 0.1}}}}})
    for (const bool contiguous : {true, false}) {
      torch::manual_seed(41);
      const at::Tensor start = torch::randn({n});
      auto laid_out = [&](const at::Tensor& t) {
        return contiguous ? t.clone() : torch::zeros({2 * n}).slice(0, 0, 2 * n, 2).copy_(t);
      };
      at::Tensor zeroing = laid_out(start), kept = laid_out(start);
      auto z = make_flat_optimizer(spec, start), k = make_flat_optimizer(spec, start);
      const std::string what = spec.dump() + (contiguous ? " fused" : " ATen");
      for (double factor : {0.5, 1.0}) {
        const at::Tensor g = torch::randn({n});
        at::Tensor zeroed = laid_out(g);
        z->step_pieces({{zeroing.narrow(0, a, n - a), zeroed.narrow(0, a, n - a), spans_within(decay, a, n - a), a}}, 0.01, {factor, true});
        k->step_pieces({{kept.narrow(0, a, n - a), laid_out(g).narrow(0, a, n - a), spans_within(decay, a, n - a), a}}, 0.01, {factor});
        EXPECT_TRUE(torch::equal(zeroed.narrow(0, 0, a), g.narrow(0, 0, a))) << what << ": outside the piece";
        EXPECT_EQ(torch::count_nonzero(zeroed.narrow(0, a, n - a)).item<int64_t>(), 0) << what;
      }
      EXPECT_TRUE(torch::equal(zeroing, kept)) << what;
      for (const auto& [name, t] : z->state()) EXPECT_TRUE(torch::equal(t, k->state().at(name))) << what << " " << name;
    }
}
