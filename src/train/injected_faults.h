// Fault injection for the tests. Each variable holds entries "step:rank" separated by commas, and
// the rank whose RANK matches is hit at that step. Unset, a call costs a getenv and one short string.
// - DTRAIN_INJECT_OVERFLOW: the step's loss is scaled by infinity, so the rank's fp16 gradients
//   overflow as a too-large loss scale would make them.
// - DTRAIN_INJECT_REPLICA_DRIFT: before the step's checkpoint one parameter element moves by one ulp
//   on that rank, as a silent fault would, for the check that every rank holds the same parameters.
// - DTRAIN_INJECT_SAVE_FAILURE: the step's checkpoint cannot be written on that rank, as on a full disk.
// - DTRAIN_INJECT_SLOW_SAVE: the step's background save (checkpoint.async) on that rank starts writing
//   only when the training thread waits for it (the next save, the run's end), as behind a slow disk:
//   a save that read the live state rather than its copy would write a later step's values, and the
//   next save finds it being written and waits.
// - DTRAIN_INJECT_LOAD_FAILURE: the step's checkpoint cannot be read on that rank (not rank 0, which
//   chose it), as when its file system fails there.
// - DTRAIN_INJECT_DROP_MICRO_BATCH: that rank's pipeline leaves the step's last micro-batch out of
//   the gradient, as a schedule that lost one would (the equivalence tests must catch it).
// - DTRAIN_INJECT_DROP_TIED_GRADIENT: that rank's pipeline does not sum the tied embedding's
//   gradient with the other stage's copy.
// - DTRAIN_INJECT_UNAVERAGED_MICRO_BATCHES: that rank's pipeline sums the step's micro-batch
//   gradients without the 1/m that averages them.
#pragma once
#include <cstdint>

namespace dtrain {

bool overflow_injected(int64_t step);
bool replica_drift_injected(int64_t step);
bool save_failure_injected(int64_t step);
bool slow_save_injected(int64_t step);
bool load_failure_injected(int64_t step);
bool micro_batch_drop_injected(int64_t step);
bool tied_gradient_drop_injected(int64_t step);
bool unaveraged_micro_batches_injected(int64_t step);

}  // namespace dtrain
