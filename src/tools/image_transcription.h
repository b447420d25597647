// A vision-language checkpoint asked to write what an image holds, with the rules its training ran
// under: the image fitted to its patch grid by data.max_image_tokens and model.vision.* from the
// checkpoint's config, and the row begun as training's rows begin (data/vlm_row.h): the image's
// placeholders, then the prompt. Sampling continues the row until the end token or a full row.
#pragma once
#include <memory>
#include <string>

#include "data/sample_dataset.h"
#include "data/tokenizer.h"
#include "data/vlm_data_options.h"
#include "model/sampling.h"
#include "model/transformer.h"

namespace dtrain {

class ImageTranscriber {
 public:
  // Throws std::runtime_error naming the checkpoint when its model is not a vision-language one, and
  // std::invalid_argument when `tokenizer` makes ids past its vocabulary.
  ImageTranscriber(const std::string& checkpoint_dir, Tokenizer& tokenizer);

  // The data options the checkpoint's run trained with (its config.json's data keys).
  const VlmDataOptions& data_options() const { return options_; }
  // The data.source and data.tokenizer the checkpoint's run trained with.
  const std::string& data_source() const { return data_source_; }
  const std::string& data_tokenizer() const { return data_tokenizer_; }

  // The image file at `path`, decoded, fitted and cut into patches as training does. Throws
  // std::runtime_error naming the file when it is missing, not an image or larger than allowed.
  ImageBatch load_image(const std::string& path) const;
  // The text the model writes for `image` (one image, or none: ImageBatch{}) after `prompt`, the end
  // token left out. Throws std::invalid_argument when the row holds neither image nor prompt.
  std::string transcribe(const ImageBatch& image, const std::string& prompt, const SamplingOptions& options);
  // The same after a prompt already tokenized (a dataset sample's).
  std::string transcribe(const ImageBatch& image, const std::vector<int32_t>& prompt, SamplingOptions options);

 private:
  Transformer model_{nullptr};
  Tokenizer& tokenizer_;
  VlmDataOptions options_;
  std::string data_source_, data_tokenizer_;
};

}  // namespace dtrain
