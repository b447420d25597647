// The sections of a config, each resolved from the merged JSON into TrainConfig: the model, ZeRO's
// sharding (and FSDP's words for it), offload, precision, the batch arithmetic, and the keys dtrain
// refuses (features not built) or accepts without using (DeepSpeed's tuning keys).
#pragma once
#include <nlohmann/json.hpp>

#include <string>

#include "train/config_reader.h"
#include "train/train_config.h"

namespace dtrain {

// Overlays `user` on `base`, rejecting keys the schema lacks.
void merge_checked(nlohmann::json& base, const nlohmann::json& user, const std::string& prefix, const std::string& origin);
// Keys an earlier version reserved and this one has moved: parallel.pipeline_schedule, now
// parallel.pipeline.schedule. The one value it took ("1f1b"), which every earlier run's config.json
// holds, is removed from `user` with a warning in c.warnings (c.origin names the config); another is
// refused, naming the new key.
void drop_moved_keys(nlohmann::json& user, TrainConfig& c);
void check_unused_deepspeed_keys(const Reader& r);
void resolve_stage3_keys(const Reader& r, TrainConfig& c);
// activation_checkpointing.* into c.activation_checkpointing.store; after the model and
// train.activation_checkpointing, whose checkpointed blocks the buffer's slots default to.
void resolve_activation_store(const Reader& r, TrainConfig& c);
// train.profile_steps: [] (off) or [first, last], steps of this run (1 <= first <= last <= train.steps).
void resolve_profile_steps(const Reader& r, TrainConfig& c);
// The mesh's dims for c.world_size ranks: parallel.dp ("auto": what the other dims leave of the
// world) as dp_shard, parallel.tp (which must divide the world size), parallel.pp and
// parallel.sequence_parallel.
void resolve_parallel_dims(const Reader& r, TrainConfig& c);
// After resolve_parallel_dims, the model and train.freeze: zero_optimization.stage, FSDP's keys and
// parallel.modules, whose stages set the run's.
void resolve_sharding(const Reader& r, TrainConfig& c);
// Hybrid sharding's shard groups of `size` ranks as mesh dims: dp_shard within a group, dp_replicate
// across the groups; the resolved JSON says the size. The caller has checked that `size` divides dp.
void split_into_shard_groups(TrainConfig& c, int size);
TrainConfig::Offload resolve_offload(const Reader& r, const std::string& key, int min_stage, int stage);
void resolve_precision(const Reader& r, TrainConfig& c);
// The batch arithmetic, with parallel.micro_batches as another name of gradient_accumulation_steps.
void resolve_batch(const Reader& r, TrainConfig& c);
void warn_if_no_checkpoint(TrainConfig& c);

}  // namespace dtrain
