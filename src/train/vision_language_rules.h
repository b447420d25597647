// What a vision-language model (model.arch "vlm") runs under, checked before any work starts. Its
// parts take every forward together (the images' tokens enter the LLM's embeddings), so the
// parallelisms that cut the forward pass apart do not apply to it: pipeline stages carry hidden
// states, not images, and context parallelism would split the image tokens' places in every
// sequence over the cp ranks. Tensor parallelism splits the LLM and leaves the vision encoder and
// the connector whole on every tp rank; data parallelism and ZeRO take it as any model.
#pragma once
#include "data/vlm_data_options.h"
#include "train/config_reader.h"
#include "train/train_config.h"

namespace dtrain {

// Throws ConfigError, naming the key and its value, when a vision-language model is asked for
// parallel.pp or parallel.cp above 1, or a Hugging Face export at each save
// (zero_optimization.stage3_gather_16bit_weights_on_model_save, read from `r`), which writes GPT-2
// and Llama only. Called once the parallel dims are resolved, before the checks of tp and cp.
// Also refuses a text model on an image source (data.source "ocr" or "vlm:FILE"), naming both keys.
void check_vision_language(const Reader& r, const TrainConfig& config);

// What the run's vision-language dataset is built with: the model's sizes and the data keys.
VlmDataOptions vlm_data_options(const TrainConfig& config);

}  // namespace dtrain
