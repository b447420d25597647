// What a config names outside itself, checked before any rank starts. `dtrain run` and `dtrain
// config check` both load their config through load_run_config, so a config that check passes is
// one that run launches: a mistake that would otherwise show only inside the ranks after launch
// stops both, named by its key.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "train/train_config.h"

namespace dtrain {

// Throws ConfigError naming the key when:
// - data.source names no corpus this host can read (an unknown scheme, a bin: glob that matches
//   nothing, a missing or too short file): the ranks' own loading, run here once;
// - data.tokenizer is no tokenizer file dtrain reads, or makes ids past model.vocab_size;
// - a train.freeze glob matches no parameter of the model (its names, listed without allocating it);
// - dist.backend names a backend this build lacks (nccl in a CPU-only build);
// - an NVMe offload's nvme_path is missing, not a directory or not writable;
// - train.resume is a path that is not a directory.
void preflight_config(const TrainConfig& config);

// data.tokenizer's tokenizer (the byte tokenizer when it is empty). Throws ConfigError naming
// data.tokenizer when the file is no tokenizer dtrain reads or its ids reach past model.vocab_size.
std::unique_ptr<Tokenizer> load_run_tokenizer(const TrainConfig& config);

// load_train_config, then preflight_config.
TrainConfig load_run_config(const std::string& path, const std::vector<std::string>& sets, int world_size);

}  // namespace dtrain
