// What parallel.pp and parallel.pipeline.* ask of a config, resolved into TrainConfig::pipeline and
// checked before any work starts: the schedule and its virtual stages, the split of the blocks into
// pp × virtual_stages chunks (the cost model's, measured at start-up, or given), and what the
// micro-batches per step (gradient_accumulation_steps) and ZeRO's stage must be under a pipeline.
#pragma once
#include "train/config_reader.h"
#include "train/train_config.h"

namespace dtrain {

// After the mesh's dims, the batch arithmetic and the sharding are resolved. Throws ConfigError,
// naming the keys and their values, when:
// - parallel.pipeline.schedule is none of schedule_names();
// - parallel.pipeline.virtual_stages is above 1 and the schedule is not interleaved_1f1b;
// - parallel.pp, or parallel.pp × parallel.pipeline.virtual_stages, is more than model.n_layer: a
//   chunk would hold no block;
// - parallel.pipeline.split is not null, "auto" or a list, or a list that check_split refuses;
// - under interleaved_1f1b, parallel.pp does not divide the micro-batches per step;
// - zero_optimization.stage is 3 and parallel.pp above 1.
// Warns (c.warnings) when gpipe or 1f1b gets fewer micro-batches than pp ranks, with the bubble that
// costs, and when interleaved_1f1b has one virtual stage, which makes it 1f1b.
void resolve_pipeline(const Reader& r, TrainConfig& c);

}  // namespace dtrain
