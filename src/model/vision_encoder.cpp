#include "model/vision_encoder.h"

#include <stdexcept>
#include <string>

namespace dtrain {

namespace {

// The block shape the encoder's blocks take (block.h): GPT-2's kind, without its position table.
TransformerConfig block_config(const VisionConfig& v, double norm_eps) {
  TransformerConfig c;
  c.arch = "gpt2";
  c.n_layer = v.n_layer;
  c.n_head = v.n_head;
  c.d_model = v.d_model;
  c.d_ff = v.ff_dim();
  c.norm_eps = norm_eps;
  return c;
}

// What the host needs to know of a batch's images: their grids, and from them the index tensors of
// the stem's positions and of the tokens.
struct ImageLayout {
  std::vector<int64_t> patches_per_image;
  std::vector<int64_t> rows, cols;  // of each patch in its image
  // The patches in token order: each token's group (by rows or by columns, token_order), rows of the
  // group in turn.
  std::vector<int64_t> token_order;
};

ImageLayout image_layout(const ImageBatch& images, const VisionConfig& v) {
  ImageLayout out;
  if (images.count() == 0) return out;
  const at::Tensor grids = images.grids.to(at::kCPU).to(at::kLong).contiguous();
  if (grids.dim() != 2 || grids.size(1) != 2)
    throw std::invalid_argument("an image batch's grids must be [images, 2] (height, width in patches), got " + std::to_string(grids.dim()) +
                                " dims");
  const auto g = grids.accessor<int64_t, 2>();
  const int64_t m = v.merge;
  int64_t offset = 0;
  for (int64_t i = 0; i < grids.size(0); ++i) {
    const int64_t gh = g[i][0], gw = g[i][1];
    if (gh < 1 || gw < 1 || gh > v.max_grid || gw > v.max_grid || gh % m != 0 || gw % m != 0)
      throw std::invalid_argument("image " + std::to_string(i) + " of the batch has a grid of " + std::to_string(gh) + " x " +
                                  std::to_string(gw) + " patches; model.vision.max_grid (" + std::to_string(v.max_grid) +
                                  ") bounds each side and model.vision.merge (" + std::to_string(m) + ") must divide it");
    out.patches_per_image.push_back(gh * gw);
    for (int64_t r = 0; r < gh; ++r)
      for (int64_t c = 0; c < gw; ++c) {
        out.rows.push_back(r);
        out.cols.push_back(c);
      }
    const int64_t token_rows = gh / m, token_cols = gw / m;
    for (int64_t t = 0; t < token_rows * token_cols; ++t) {
      const int64_t r = m * (v.columns_first() ? t % token_rows : t / token_cols);
      const int64_t c = m * (v.columns_first() ? t / token_rows : t % token_cols);
      for (int64_t dr = 0; dr < m; ++dr)
        for (int64_t dc = 0; dc < m; ++dc) out.token_order.push_back(offset + (r + dr) * gw + c + dc);
    }
    offset += gh * gw;
  }
  return out;
}

at::Tensor index_tensor(const std::vector<int64_t>& values, const at::Device& device) {
  return at::tensor(at::ArrayRef<int64_t>(values), at::kLong).to(device);
}

// Bidirectional attention within each image of a packed sequence q, k, v [1, H, Σ patches, hd]
// whose images hold `lengths` patches, in order: a run of images of one length is one batched call.
// Without images the call runs on the empty sequence, so q, k and v still get their gradients.
AttentionCore per_image_attention(std::vector<int64_t> lengths) {
  return [lengths = std::move(lengths)](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    if (lengths.empty()) return at::scaled_dot_product_attention(q, k, v);
    const int64_t H = q.size(1), hd = q.size(3);
    std::vector<at::Tensor> out;
    int64_t start = 0;
    for (size_t i = 0; i < lengths.size();) {
      size_t j = i;
      while (j < lengths.size() && lengths[j] == lengths[i]) ++j;
      const int64_t n = int64_t(j - i), L = lengths[i];
      // [1, H, n·L, hd] → [n, H, L, hd]: the images of the run as a batch.
      auto images = [&](const at::Tensor& t) { return t.narrow(2, start, n * L).reshape({H, n, L, hd}).transpose(0, 1); };
      const at::Tensor o = at::scaled_dot_product_attention(images(q), images(k), images(v));
      out.push_back(o.transpose(0, 1).reshape({1, H, n * L, hd}));
      start += n * L;
      i = j;
    }
    return out.size() == 1 ? out.front() : at::cat(out, 2);
  };
}

}  // namespace

VisionEncoderImpl::VisionEncoderImpl(const VisionConfig& v, double norm_eps) : v_(v) {
  patch_embed = register_module("patch_embed", Linear(v.patch_values(), v.d_model, true));
  row_embed = register_module("row_embed", Embedding(v.max_grid, v.d_model));
  col_embed = register_module("col_embed", Embedding(v.max_grid, v.d_model));
  auto container = register_module("blocks", std::make_shared<torch::nn::Module>());
  const TransformerConfig blocks = block_config(v, norm_eps);
  for (int i = 0; i < v.n_layer; ++i) blocks_.push_back(container->register_module(std::to_string(i), Block(blocks)));
  ln_post = register_module("ln_post", Norm(NormImpl::Kind::LayerNorm, v.d_model, norm_eps));
}

at::Tensor VisionEncoderImpl::forward(const ImageBatch& images, int first_part, const RunPart& run_part) {
  const ImageLayout layout = image_layout(images, v_);
  const int64_t patches = int64_t(layout.rows.size());
  const at::Device device = patch_embed->weight.device();
  const at::Tensor pixels = images.patches.defined() ? images.patches.to(device, at::kFloat)
                                                     : at::zeros({0, v_.patch_values()}, at::TensorOptions().device(device));
  if (pixels.dim() != 2 || pixels.size(0) != patches || pixels.size(1) != v_.patch_values())
    throw std::invalid_argument("an image batch's patches must be [" + std::to_string(patches) + " (its grids' patches), " +
                                std::to_string(v_.patch_values()) + " (model.vision.channels x patch_size^2)], got " +
                                std::to_string(pixels.size(0)) + " x " + std::to_string(pixels.dim() > 1 ? pixels.size(1) : 0));
  at::Tensor x = run_part(first_part, [&] {
    const at::Tensor positions = row_embed(index_tensor(layout.rows, device)) + col_embed(index_tensor(layout.cols, device));
    return (patch_embed(pixels).to(at::kFloat) + positions).unsqueeze(0);  // [1, patches, d]
  });
  for (size_t i = 0; i < blocks_.size(); ++i) {
    blocks_[i]->set_attention_core(per_image_attention(layout.patches_per_image));
    x = run_part(first_part + 1 + int(i), [&] { return blocks_[i]->forward(x, at::Tensor(), at::Tensor()); });
  }
  return run_part(first_part + part_count() - 1, [&] {
    const at::Tensor features = ln_post(x).squeeze(0);  // [patches, d]
    if (v_.merge == 1 && !v_.columns_first()) return features;
    return features.index_select(0, index_tensor(layout.token_order, device)).reshape({patches / (v_.merge * v_.merge), v_.merged_dim()});
  });
}

std::vector<ForwardPart> VisionEncoderImpl::forward_parts(const std::string& prefix, int first_part) const {
  std::vector<ForwardPart> parts;
  parts.push_back(make_forward_part(ForwardPart::Kind::Vision, first_part,
                                    {{prefix + ".patch_embed", patch_embed.get()},
                                     {prefix + ".row_embed", row_embed.get()},
                                     {prefix + ".col_embed", col_embed.get()}}));
  for (size_t i = 0; i < blocks_.size(); ++i)
    parts.push_back(make_forward_part(ForwardPart::Kind::Block, first_part + 1 + int(i),
                                      {{prefix + ".blocks." + std::to_string(i), blocks_[i].get()}}));
  parts.push_back(make_forward_part(ForwardPart::Kind::Vision, first_part + part_count() - 1, {{prefix + ".ln_post", ln_post.get()}}));
  return parts;
}

void VisionEncoderImpl::set_precision(const MixedPrecision& mp) {
  patch_embed->set_precision(mp);
  for (auto& b : blocks_) b->set_precision(mp);
}

std::vector<Linear> VisionEncoderImpl::matmul_layers() const {
  std::vector<Linear> layers{patch_embed};
  for (const auto& b : blocks_)
    for (const auto& layer : b->matmul_layers()) layers.push_back(layer);
  return layers;
}

}  // namespace dtrain
