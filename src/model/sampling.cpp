#include "model/sampling.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <stdexcept>

namespace dtrain {

std::vector<int64_t> sample_tokens(Transformer& model, const std::vector<int64_t>& prompt, const SamplingOptions& options,
                                   const ImageBatch& images) {
  if (prompt.empty()) throw std::invalid_argument("the prompt must hold at least one token");
  const auto& c = model->config();
  for (int64_t t : prompt)
    if (t < 0 || t >= c.vocab_size) throw std::invalid_argument("prompt token " + std::to_string(t) + " is outside the vocabulary");
  at::NoGradGuard no_grad;
  model->eval();
  const auto device = model->parameters().front().device();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  const bool fixed_context = images.count() > 0;
  if (fixed_context && int64_t(prompt.size()) > c.seq_len)
    throw std::invalid_argument("the prompt's " + std::to_string(prompt.size()) + " tokens, its image's included, exceed model.seq_len " +
                                std::to_string(c.seq_len));
  ImageBatch on_device = images;
  if (images.patches.defined()) on_device = ImageBatch{images.patches.to(device), images.grids};
  std::vector<int64_t> tokens = prompt;
  for (int64_t i = 0; i < options.new_tokens && !(fixed_context && int64_t(tokens.size()) >= c.seq_len); ++i) {
    const int64_t context = std::min<int64_t>(int64_t(tokens.size()), c.seq_len);
    auto input = at::tensor(std::vector<int64_t>(tokens.end() - context, tokens.end()), at::kLong).view({1, context}).to(device);
    auto logits = model->forward(input, on_device).select(1, context - 1).squeeze(0).to(at::kCPU).to(at::kDouble);
    int64_t next;
    if (options.temperature <= 0) {
      next = logits.argmax().item<int64_t>();
    } else {
      // Shifted so the largest logit is 0 first: a tiny temperature then scales the others towards
      // -inf, where dividing raw logits overflows to inf and softmax turns inf - inf into NaN.
      logits = (logits - logits.max()) / options.temperature;
      if (options.top_k > 0 && options.top_k < logits.size(0)) {
        const double kth = std::get<0>(logits.topk(options.top_k)).min().item<double>();
        logits = logits.masked_fill(logits < kth, -INFINITY);
      }
      next = at::multinomial(at::softmax(logits, 0), 1, false, gen).item<int64_t>();
    }
    if (std::find(options.stop_tokens.begin(), options.stop_tokens.end(), next) != options.stop_tokens.end()) break;
    tokens.push_back(next);
  }
  return std::vector<int64_t>(tokens.begin() + int64_t(prompt.size()), tokens.end());
}

}  // namespace dtrain
