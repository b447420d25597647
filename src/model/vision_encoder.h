// A vision-language model's ViT encoder (vision_config.h): patches → image tokens.
//   stem        vision.patch_embed (a linear layer over each patch's channel·patch·patch values, in
//               the order the data lays them out) plus learned 2-D positions: vision.row_embed[r] +
//               vision.col_embed[c] for the patch at row r, column c of its image, so any grid up to
//               max_grid × max_grid has positions;
//   blocks      vision.blocks.N: pre-norm transformer blocks (LayerNorm, biases, GELU MLP; block.h's
//               GPT-2 kind) whose attention is bidirectional and within each image only;
//   final norm  vision.ln_post, then with merge 2 each 2×2 group of neighbouring patches' features
//               side by side as one token (Qwen2-VL's merge), in the image's row-major order of groups.
// The images of a batch run packed, one sequence of all their patches: every linear layer and norm
// runs once over all of them, with no padding, and attention is split by image (a run of images of
// one size as one batched call). A batch without images runs the same layers on no patches, so every
// parameter still gets its (zero) gradient and every rank's collectives match.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "data/sample_dataset.h"
#include "model/block.h"
#include "model/embedding.h"
#include "model/forward_part_hooks.h"
#include "model/linear.h"
#include "model/norm.h"
#include "model/vision_config.h"

namespace dtrain {

// Runs one part of the forward pass (forward_part_hooks.h) by its index: its hooks around `run`.
using RunPart = std::function<at::Tensor(int part, const std::function<at::Tensor()>& run)>;

class VisionEncoderImpl : public torch::nn::Module {
 public:
  VisionEncoderImpl(const VisionConfig& v, double norm_eps);

  // The image tokens of `images`, [Σ (gh/merge)·(gw/merge), d_model·merge²] in the images' order:
  // fp32 on the parameters' device. The grids are read on the host; the patches are moved to the
  // parameters' device when they are elsewhere. Throws std::invalid_argument for a grid above
  // max_grid or not a multiple of merge, or patches that do not match the grids or the patch size.
  // Its parts are `first_part` (the stem) to first_part + part_count() - 1 (the final norm), each
  // run through `run_part`.
  at::Tensor forward(const ImageBatch& images, int first_part, const RunPart& run_part);

  // stem, n_layer blocks, final norm.
  int part_count() const { return int(blocks_.size()) + 2; }
  // The parts with their parameters named under `prefix` ("vision"), numbered from `first_part`.
  std::vector<ForwardPart> forward_parts(const std::string& prefix, int first_part) const;
  void set_precision(const MixedPrecision& mp);
  std::vector<Linear> matmul_layers() const;

  Linear patch_embed{nullptr};
  Embedding row_embed{nullptr}, col_embed{nullptr};
  Norm ln_post{nullptr};

 private:
  VisionConfig v_;
  std::vector<Block> blocks_;
};
TORCH_MODULE(VisionEncoder);

}  // namespace dtrain
