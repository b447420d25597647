#include "train/replica_checks.h"

#include <cmath>

#include "comm/collectives.h"
#include "train/parameter_fingerprint.h"

namespace dtrain {

namespace {

bool cut_over_tp(const HeldParameter& p) {
  for (const auto& [dim, placement] : p.spec.placements)
    if (dim == "tp" && placement.kind == Placement::Kind::Shard) return true;
  return false;
}

// What every rank of a tp group holds the same copy of: the pieces of the parameters tensor
// parallelism left whole (norms, positions, shared key/value weights), where they are not ZeRO-3 shards.
std::vector<at::Tensor> replicated_over_tp(const ParallelPlan& plan) {
  std::vector<at::Tensor> out;
  for (const HeldParameter& p : plan.layout.parameters) {
    if (cut_over_tp(p) || (plan.sharded && p.trained)) continue;
    for (const PlacedPiece& piece : p.pieces) out.push_back(p.local.narrow(0, piece.local_offset, numel(piece.piece)));
  }
  return out;
}

}  // namespace

void check_replicas_agree(ParallelPlan& plan, World& world, int64_t step, bool inject_drift) {
  plan.optimizer->finish_parameter_updates();
  const bool sharded = plan.sharded != nullptr;
  const std::vector<at::Tensor> replicated = plan.replicated_parameters();
  if (inject_drift) {
    at::NoGradGuard no_grad;
    at::Tensor first = plan.updated_parameters().narrow(0, 0, 1);
    first.copy_(at::nextafter(first, at::full_like(first, INFINITY)));
  }
  const auto mine = at::tensor({parameter_fingerprint(replicated), sharded ? parameter_fingerprint({plan.sharded->shard()}) : int64_t(0),
                                parameter_fingerprint(replicated_over_tp(plan))},
                               at::kLong)
                        .to(world.device());
  // Gathered over the world, so that every rank reaches the same verdict; each copy is compared with
  // the first of its replica group.
  const at::Tensor all = all_gather(*world.world_group(), mine, "parameter fingerprint").cpu();
  const DeviceMesh& mesh = *plan.mesh;
  auto differ = [&](const std::string& what, int rank, int holder, int index) {
    const int64_t got = all[3 * rank + index].item<int64_t>(), expected = all[3 * holder + index].item<int64_t>();
    if (got == expected) return;
    throw std::runtime_error("after step " + std::to_string(step) + " " + what + " of rank " + std::to_string(rank) +
                             (index == 1 ? " differs from rank " : " differ from rank ") + std::to_string(holder) + "'s (fingerprints " +
                             std::to_string(got) + " and " + std::to_string(expected) +
                             "): the replicas have diverged, a bug or a fault on rank " + std::to_string(rank) +
                             "'s machine; no checkpoint is written");
  };
  for (int r = 0; r < world.size(); ++r) {
    // What is replicated, every data-parallel rank holds; a shard, the replicas of hybrid sharding.
    differ(sharded ? "the parameters held whole (frozen or kept whole)" : "the parameters", r, mesh.members("dp_cp", r).front(), 0);
    if (sharded) differ("the parameter shard", r, mesh.members("dp_replicate", r).front(), 1);
    // What tensor parallelism left whole, every rank of a tp group holds.
    differ("the parameters replicated over tp", r, mesh.members("tp", r).front(), 2);
  }
}

bool parameters_finite(ParallelPlan& plan, World& world) {
  plan.optimizer->finish_parameter_updates();
  // Whole parameters are the same on every rank that holds them, but pipeline stages hold different ones.
  if (!plan.sharded && !plan.pipeline) return plan.flat->data().isfinite().all().item<bool>();
  const at::Tensor& mine = plan.sharded ? plan.sharded->shard() : plan.flat->data();
  auto finite = at::scalar_tensor(mine.isfinite().all().item<bool>() ? 1.0 : 0.0, at::kDouble).reshape({1}).to(world.device());
  all_reduce(*world.world_group(), finite, ReduceOp::Min, "parameters finite");
  return finite.item<double>() == 1.0;
}

}  // namespace dtrain
