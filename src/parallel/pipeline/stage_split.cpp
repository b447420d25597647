#include "parallel/pipeline/stage_split.h"

#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "common/elapsed.h"
#include "model/loss.h"
#include "model/transformer.h"

namespace dtrain {

namespace {

// The cross-entropy's arithmetic per logit, forward and backward together: the max, the shifted
// exponent, the sum and the log forward, the softmax less the one-hot target backward.
constexpr double kLossFlopsPerLogit = 8;

// The cost of chunk `chunk` of `chunks` holding `blocks` blocks.
double chunk_cost(const LayerCosts& costs, int chunk, int chunks, int blocks) {
  return blocks * costs.block + (chunk == 0 ? costs.embedding : 0) + (chunk == chunks - 1 ? costs.head : 0);
}

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& item : items) s += (s.empty() ? "" : ", ") + item;
  return s;
}

std::string list_text(const std::vector<int>& split) {
  std::vector<std::string> items;
  for (int blocks : split) items.push_back(std::to_string(blocks));
  return "[" + join(items) + "]";
}

void synchronize(const at::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

}  // namespace

LayerCosts model_layer_costs(const TransformerConfig& c, int64_t micro_batch) {
  const double tokens = double(micro_batch) * c.seq_len;
  const double d = c.d_model, hd = c.head_dim(), T = c.seq_len, V = c.vocab_size;
  // The weights each token meets in a block's matmuls: q and o span the query heads, k and v the
  // key/value heads (fewer under grouped-query attention), the MLP two d × d_ff matrices (GPT-2) or
  // SwiGLU's three (Llama).
  const double block_weights = d * hd * (2.0 * c.n_head + 2.0 * c.kv_heads()) + (c.is_llama() ? 3.0 : 2.0) * d * c.ff_dim();
  // Forward: 2 FLOPs per weight, and QKᵀ and ·V at 2·T·head_dim each per query head (the half the
  // causal mask hides counted too, as train_flops_per_token counts it); backward is twice forward.
  const double block_forward = 2 * block_weights + 4 * T * hd * c.n_head;
  // The lookup moves d_model values a token (GPT-2 adds its position's too) and its backward adds
  // them back: next to a block it is nothing, which is what the count needs to say.
  const double embedding = (c.is_llama() ? 1.0 : 2.0) * d * 3;
  // The head's GEMM is d_model × vocab whether or not it is tied to the embedding.
  const double head = 3 * 2 * d * V + kLossFlopsPerLogit * V;
  return {tokens * embedding, tokens * 3 * block_forward, tokens * head};
}

LayerCostProbe::LayerCostProbe(const TransformerConfig& c, const MixedPrecision& mp, at::Device device, uint64_t seed)
    : c_(c),
      device_(device),
      generator_(at::make_generator<at::CPUGeneratorImpl>(seed)),
      embedding_(c, seed, TransformerParts{true, {{0, 0}}, false}),
      block_(c, seed, TransformerParts::blocks(0, 1)),
      head_(c, seed, TransformerParts{false, {{c.n_layer, c.n_layer}}, true}) {
  for (Transformer* part : {&embedding_, &block_, &head_}) {
    (*part)->to(device);
    (*part)->set_precision(mp);
    (*part)->refresh_working_copy();
  }
}

const LayerCostProbe::Inputs& LayerCostProbe::inputs(int64_t micro_batch) {
  auto [it, fresh] = inputs_.try_emplace(micro_batch);
  if (fresh) {
    const std::vector<int64_t> hidden{micro_batch, c_.seq_len, c_.d_model};
    const auto on_device = at::TensorOptions().device(device_);
    it->second = {at::randint(c_.vocab_size, {micro_batch, c_.seq_len}, generator_, at::kLong).to(device_),
                  at::randn(hidden, generator_).to(on_device), at::randn(hidden, generator_).to(on_device)};
  }
  return it->second;
}

LayerCosts LayerCostProbe::time(int64_t micro_batch) {
  const Inputs& in = inputs(micro_batch);
  // One part's forward and backward: the gradient of what it returns arrives from the next stage
  // (upstream), or, for the head, from the loss; a part without the embedding computes its input's
  // gradient, which it sends back.
  auto time_part = [&](Transformer& part, bool embedding, bool head) {
    const at::Tensor input = embedding ? in.tokens : in.hidden.clone().requires_grad_();
    synchronize(device_);
    const auto start = std::chrono::steady_clock::now();
    const at::Tensor out = part->forward(input);
    if (head) next_token_loss(out, in.tokens).backward();
    else out.backward(in.upstream);
    synchronize(device_);
    return seconds_since(start);
  };
  return {time_part(embedding_, true, false), time_part(block_, false, false), time_part(head_, false, true)};
}

LayerCosts fastest(const LayerCosts& a, const LayerCosts& b) {
  return {std::min(a.embedding, b.embedding), std::min(a.block, b.block), std::min(a.head, b.head)};
}

LayerCosts measure_layer_costs(const TransformerConfig& c, int64_t micro_batch, const MixedPrecision& mp, at::Device device,
                               uint64_t seed) {
  LayerCostProbe probe(c, mp, device, seed);
  probe.time(micro_batch);  // warm-up: the first pass allocates
  LayerCosts best = probe.time(micro_batch);
  for (int i = 0; i < 2; ++i) best = fastest(best, probe.time(micro_batch));
  return best;
}

std::vector<int> balance_split(const LayerCosts& costs, int n_layer, int chunks) {
  if (chunks < 1 || chunks > n_layer)
    throw std::invalid_argument("cannot cut " + std::to_string(n_layer) + " blocks into " + std::to_string(chunks) +
                                " chunks of at least one block each");
  const double inf = std::numeric_limits<double>::infinity();
  const size_t C = size_t(chunks), n = size_t(n_layer);
  // worst[c][j]: the least largest cost of chunks 0..c holding blocks [0, j).
  std::vector<std::vector<double>> worst(C, std::vector<double>(n + 1, inf));
  for (size_t j = 1; j <= n; ++j) worst[0][j] = chunk_cost(costs, 0, chunks, int(j));
  for (size_t c = 1; c < C; ++c)
    for (size_t j = c + 1; j <= n; ++j)
      for (size_t i = c; i < j; ++i)
        worst[c][j] = std::min(worst[c][j], std::max(worst[c - 1][i], chunk_cost(costs, int(c), chunks, int(j - i))));
  const double limit = worst[C - 1][n];
  // Among the splits none of whose chunks costs more than `limit`, the least sum of squared costs:
  // squares[c][j] as worst[c][j], with from[c][j] the first block of chunk c.
  std::vector<std::vector<double>> squares(C, std::vector<double>(n + 1, inf));
  std::vector<std::vector<size_t>> from(C, std::vector<size_t>(n + 1, 0));
  auto square_if_within = [&](size_t c, size_t blocks) {
    const double cost = chunk_cost(costs, int(c), chunks, int(blocks));
    return cost <= limit ? cost * cost : inf;
  };
  for (size_t j = 1; j <= n; ++j) squares[0][j] = square_if_within(0, j);
  for (size_t c = 1; c < C; ++c)
    for (size_t j = c + 1; j <= n; ++j)
      for (size_t i = c; i < j; ++i)
        if (const double total = squares[c - 1][i] + square_if_within(c, j - i); total < squares[c][j]) {
          squares[c][j] = total;
          from[c][j] = i;
        }
  std::vector<int> split(C);
  size_t end = n;
  for (size_t c = C; c-- > 0;) {
    const size_t begin = c == 0 ? 0 : from[c][end];
    split[c] = int(end - begin);
    end = begin;
  }
  return split;
}

std::vector<double> chunk_costs(const LayerCosts& costs, const std::vector<int>& split) {
  std::vector<double> out;
  for (size_t c = 0; c < split.size(); ++c) out.push_back(chunk_cost(costs, int(c), int(split.size()), split[c]));
  return out;
}

void check_split(const std::vector<int>& split, int pp, int virtual_stages, int n_layer) {
  const std::string key = "'parallel.pipeline.split' " + list_text(split);
  const size_t chunks = size_t(pp) * size_t(virtual_stages);
  if (split.size() != chunks)
    throw std::invalid_argument(key + " gives " + std::to_string(split.size()) + " chunk(s), but parallel.pp " + std::to_string(pp) +
                                " x parallel.pipeline.virtual_stages " + std::to_string(virtual_stages) + " makes " +
                                std::to_string(chunks) + ": give one block count per chunk");
  for (size_t c = 0; c < split.size(); ++c)
    if (split[c] < 1)
      throw std::invalid_argument(key + " gives chunk " + std::to_string(c) + " " + std::to_string(split[c]) +
                                  " blocks; every chunk holds at least one block");
  const long long total = std::accumulate(split.begin(), split.end(), 0LL);
  if (total != n_layer)
    throw std::invalid_argument(key + " places " + std::to_string(total) + " blocks, but model.n_layer is " + std::to_string(n_layer) +
                                ": a split places every block of the model exactly once");
}

std::string describe_split(const std::vector<int>& split, const LayerCosts& costs, const std::string& source) {
  const std::vector<double> each = chunk_costs(costs, split);
  const double total = std::accumulate(each.begin(), each.end(), 0.0);
  std::vector<std::string> blocks, shares;
  for (size_t c = 0; c < split.size(); ++c) {
    blocks.push_back(std::to_string(split[c]));
    char share[32];
    std::snprintf(share, sizeof share, "%.2f", total > 0 ? each[c] / total : 0.0);
    shares.push_back(share);
  }
  return "pipeline split (" + source + "): chunks of " + join(blocks) + " blocks; costs " + join(shares) + " of the total";
}

}  // namespace dtrain
