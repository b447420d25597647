// The three products of each linear layer of a GPT (the output x·Wᵀ + b, the input gradient g·W,
// the weight gradient gᵀ·x) timed through MKL's SGEMM, as at::linear and at::mm take them, and
// through oneDNN's inner product (ATen's mkldnn linear operator, as model/linear_gemm.h calls it),
// and which of the two the model's fp32 layers take (matmul_nt's choice). Per product: the best of --rounds rounds of the median of
// --reps calls, the two sides alternating. Prints a table. --layers times other shapes instead of the
// GPT's (bench/tp_projection.py times a tensor-parallel rank's slices of a larger model with it).
// Usage: build/bench_linear_gemm [--d-model 384] [--d-ff 1536] [--vocab 256] [--tokens 2048] [--threads 1]
//                                [--layers NAME=OUTxIN,...]
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "common/flag_bounds.h"
#include "common/parse_command_line.h"
#include "model/linear_gemm.h"

namespace {

double median_ms(const std::function<at::Tensor()>& call, int reps) {
  call();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// "q=256x2048" -> {"q", 256, 2048}; throws naming the spec when it is not NAME=OUTxIN.
std::tuple<std::string, int64_t, int64_t> parse_layer(const std::string& spec) {
  const auto eq = spec.find('='), x = spec.find('x', eq == std::string::npos ? 0 : eq);
  try {
    if (eq == 0 || eq == std::string::npos || x == std::string::npos) throw std::invalid_argument(spec);
    size_t used_out = 0, used_in = 0;
    const std::string out = spec.substr(eq + 1, x - eq - 1), in = spec.substr(x + 1);
    const int64_t n = std::stoll(out, &used_out), k = std::stoll(in, &used_in);
    if (used_out != out.size() || used_in != in.size() || n < 1 || k < 1) throw std::invalid_argument(spec);
    return {spec.substr(0, eq), n, k};
  } catch (const std::logic_error&) {
    throw std::invalid_argument("--layers: '" + spec + "' is not NAME=OUTxIN with positive sizes (e.g. q=256x2048)");
  }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t d = 384, ff = 1536, vocab = 256, tokens = 2048;
  int threads = 1, reps = 20, rounds = 3;
  std::vector<std::string> layer_specs;
  CLI::App app{"MKL's SGEMM against oneDNN's inner product on a GPT's linear layers."};
  app.add_option("--d-model", d, "model width")->capture_default_str()->check(dtrain::whole_number(1, 1 << 20));
  app.add_option("--d-ff", ff, "MLP width")->capture_default_str()->check(dtrain::whole_number(1, 1 << 20));
  app.add_option("--vocab", vocab, "vocabulary (the head)")->capture_default_str()->check(dtrain::whole_number(1, 1 << 24));
  app.add_option("--tokens", tokens, "tokens per micro-batch (batch x sequence)")->capture_default_str()->check(dtrain::whole_number(1, 1 << 24));
  app.add_option("--threads", threads, "intra-op threads")->capture_default_str()->check(dtrain::whole_number(1, 1024));
  app.add_option("--reps", reps, "calls per measurement")->capture_default_str()->check(dtrain::whole_number(1, INT_MAX));
  app.add_option("--rounds", rounds, "rounds, alternating the sides")->capture_default_str()->check(dtrain::whole_number(1, INT_MAX));
  app.add_option("--layers", layer_specs, "time these layers instead of the GPT's: NAME=OUTxIN, comma-separated")->delimiter(',');
  if (const auto code = dtrain::parse_command_line(app, argc, argv)) return *code;
  std::vector<std::tuple<std::string, int64_t, int64_t>> layers = {
      {"qkv", 3 * d, d}, {"proj", d, d}, {"fc", ff, d}, {"fc_proj", d, ff}, {"head", vocab, d}};
  if (!layer_specs.empty()) {
    layers.clear();
    try {
      for (const auto& spec : layer_specs) layers.push_back(parse_layer(spec));
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "bench_linear_gemm: error: %s\n", e.what());
      return 2;
    }
  }

  at::set_num_threads(threads);
  std::printf("| layer | out x in | product | MKL SGEMM (ms) | oneDNN (ms) | MKL / oneDNN | dtrain takes |\n"
              "|---|---|---|---:|---:|---:|---|\n");
  double mkl_total = 0, onednn_total = 0, dtrain_total = 0;
  for (const auto& [name, n, k] : layers) {
    const at::Tensor x = torch::randn({tokens, k}), w = torch::randn({n, k}), b = torch::randn({n}), g = torch::randn({tokens, n});
    using Product = std::tuple<const char*, std::function<at::Tensor()>, std::function<at::Tensor()>, bool>;
    const std::vector<Product> products = {
        {"x·Wᵀ + b", [&] { return at::linear(x, w, b); }, [&] { return dtrain::onednn_matmul_nt(x, w, b); }, dtrain::matmul_nt_uses_onednn(x)},
        {"g·W", [&] { return at::mm(g, w); }, [&] { return dtrain::onednn_matmul_nt(g, w.t()); }, dtrain::matmul_nt_uses_onednn(g)},
        {"gᵀ·x", [&] { return at::mm(g.t(), x); }, [&] { return dtrain::onednn_matmul_nt(g.t(), x.t()); }, dtrain::matmul_nt_uses_onednn(g.t())}};
    for (const auto& [product, mkl, onednn, dtrain_onednn] : products) {
      double best_mkl = 1e300, best_onednn = 1e300;
      for (int r = 0; r < rounds; ++r) {
        best_mkl = std::min(best_mkl, median_ms(mkl, reps));
        best_onednn = std::min(best_onednn, median_ms(onednn, reps));
      }
      mkl_total += best_mkl;
      onednn_total += best_onednn;
      dtrain_total += dtrain_onednn ? best_onednn : best_mkl;
      std::printf("| %s | %lld x %lld | %s | %.2f | %.2f | %.3fx | %s |\n", name.c_str(), static_cast<long long>(n), static_cast<long long>(k),
                  product, best_mkl, best_onednn, best_mkl / best_onednn, dtrain_onednn ? "oneDNN" : "MKL");
    }
  }
  std::printf("| all | | | %.1f | %.1f | %.3fx | |\n", mkl_total, onednn_total, mkl_total / onednn_total);
  std::printf("| all, dtrain's choice | | | %.1f | | %.3fx faster than MKL alone | |\n", dtrain_total, mkl_total / dtrain_total);
  return 0;
}
