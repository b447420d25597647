#include "train/parallelize.h"

#include <algorithm>
#include <functional>

#include "comm/collectives.h"
#include "common/number_text.h"
#include "common/printable.h"
#include "model/parameter_shapes.h"
#include "parallel/context/apply_cp.h"
#include "parallel/ddp/data_parallel.h"
#include "parallel/pipeline/apply_pp.h"
#include "parallel/tensor/apply_tp.h"
#include "parallel/zero/parameter_units.h"
#include "parallel/zero/reduce_scatter_grads.h"
#include "parallel/zero/sharded_table.h"
#include "parallel/zero/zero_optimizer.h"
#include "train/activation_store_setup.h"
#include "train/config_errors.h"
#include "train/freeze_globs.h"
#include "train/host_memory.h"
#include "train/parallel_plan_summary.h"
#include "train/shard_optimizer.h"

namespace dtrain {

namespace {

// The steps of parallelize(), in its order, sharing what each leaves for the next.
class Parallelizer {
 public:
  Parallelizer(Transformer& model, World& world, std::shared_ptr<DeviceMesh> mesh, const TrainConfig& config)
      : model_(model), world_(world), c_(config) {
    plan_.mesh = std::move(mesh);
  }

  ParallelPlan run() {
    build_stage_model();
    auto named = apply_freeze();
    apply_tensor_parallel();
    apply_context_parallel();
    model_->to(world_.device());  // keeps each parameter's identity, so `named` and the frozen list stay valid
    apply_precision();
    apply_data_parallel(named);
    make_optimizer();
    for (auto& line : describe_parallel_plan(plan_, c_, {world_.device(), precision_, group_->size(), owned_numel_}))
      plan_.setup_lines.push_back(std::move(line));
    return std::move(plan_);
  }

 private:
  void build_stage_model();
  std::vector<std::pair<std::string, at::Tensor>> apply_freeze();
  void require_every_stage_trains() const;
  void apply_tensor_parallel();
  void apply_context_parallel();
  void find_stage_gradients();
  void find_kept_whole();
  Spans gradient_spans(const std::function<bool(const HeldParameter&)>& which) const;
  void find_split_gradients();
  void apply_precision();
  void apply_data_parallel(std::vector<std::pair<std::string, at::Tensor>> named);
  RowSplit table_split(const std::vector<GradBucket>& units) const;
  void shard_parameters(const std::shared_ptr<Group>& group, const std::vector<GradBucket>& units, const DataParallelOptions& options,
                        const RowSplit& split);
  void keep_shard_on_nvme();
  void make_optimizer();
  // parallel.modules keeps it whole on every rank in a run that shards the others; null when none is.
  KeptWhole kept_whole() const;

  Transformer& model_;
  World& world_;
  const TrainConfig& c_;
  ParallelPlan plan_;
  MixedPrecision precision_;
  std::vector<at::Tensor> matmul_only_;
  std::vector<ForwardPart> parts_;  // the model's, which ZeRO's units and gathers follow
  std::shared_ptr<Group> group_;  // what ZeRO shards over (and, at every stage, the checkpoint's writers split): dp_shard_cp
  std::unique_ptr<BucketShards> shards_;  // until the optimizer takes them
  int64_t owned_numel_ = 0;                // of the ZeRO shards
  ModelPlacements model_placements_;       // what model parallelism cut, by parameter name
};

// Without pp the whole model; with it the chunks of this rank's stage, so no rank ever holds the
// whole model.
void Parallelizer::build_stage_model() {
  const DeviceMesh& mesh = *plan_.mesh;
  if (mesh.size("pp") == 1) {
    model_ = Transformer(c_.model, c_.seed);
    return;
  }
  PipelineParallelPlan pp = as_config_error([&] {
    return apply_pp(world_, mesh, c_.model, c_.seed, c_.pipeline, !c_.json["parallel"]["pipeline"]["split"].is_null(), c_.micro_batch,
                    int(c_.accumulation), MixedPrecision::make(c_.precision, world_.device()));
  });
  model_ = pp.model;
  for (auto& line : pp.setup_lines) plan_.setup_lines.push_back(std::move(line));
  model_placements_ = pp.stages->placements;
  plan_.model_parallel_groups.push_back(pp.stages->pp);
  plan_.pipeline = std::move(pp.stages);
}

KeptWhole Parallelizer::kept_whole() const {
  if (c_.modules.kept_whole.empty()) return nullptr;
  return [this](const std::string& name) { return c_.modules.keeps_whole(name); };
}

// Every parameter by name in registration order; those train.freeze or parallel.modules freeze no
// longer need gradients.
std::vector<std::pair<std::string, at::Tensor>> Parallelizer::apply_freeze() {
  std::vector<std::pair<std::string, at::Tensor>> named;
  std::vector<std::string> names;
  for (auto& item : model_->named_parameters()) {
    if (c_.freezes(item.key())) {
      item.value().requires_grad_(false);
      plan_.frozen.push_back(item.value());
      plan_.frozen_numel += item.value().numel();
    }
    named.emplace_back(item.key(), item.value());
  }
  // Against the whole model's names: a glob may name what another pipeline stage holds.
  for (const ParameterShape& s : parameter_shapes(c_.model)) names.push_back(s.name);
  require_freeze_globs_match(c_.freeze, names);
  if (plan_.pipeline) require_every_stage_trains();
  return named;
}

// A pipeline stage holding only frozen parameters would have nothing to train (and no flat buffer to
// build). Every rank finds the same stage from the global placements, so all refuse alike, before
// any collective.
void Parallelizer::require_every_stage_trains() const {
  const int pp = plan_.mesh->size("pp");
  std::vector<bool> trains(size_t(pp), false);
  for (const auto& [name, placements] : model_placements_)
    if (!c_.freezes(name))
      for (const auto& [dim, placement] : placements)
        if (dim == "pp")
          for (int stage : placement.stages) trains[size_t(stage)] = true;
  const auto& chunks = plan_.pipeline->chunks;
  for (int stage = 0; stage < pp; ++stage) {
    if (trains[size_t(stage)]) continue;
    std::string blocks;
    for (size_t k = size_t(stage); k < chunks.size(); k += size_t(pp))
      blocks += (blocks.empty() ? "" : ", ") + std::to_string(chunks[k].first) + "-" + std::to_string(chunks[k].end - 1);
    if (stage == 0) blocks += ", the embeddings";
    throw ConfigError("parallel.pp: pipeline stage " + std::to_string(stage) + " (blocks " + blocks +
                      ") holds only parameters that train.freeze or parallel.modules freeze, so it has nothing to train; "
                      "give it a trained block with parallel.pipeline.split, or use fewer stages");
  }
}

void Parallelizer::apply_tensor_parallel() {
  TensorParallelPlan tp = as_config_error([&] { return apply_tp(model_, *plan_.mesh, {c_.sequence_parallel, c_.tp_overlap_grad_reduce}); });
  if (tp.loss) {
    plan_.loss = std::move(tp.loss);
    plan_.model_parallel_groups.push_back(plan_.mesh->group("tp"));
  }
  for (auto& [name, placements] : tp.placements) {  // after the stage's: pp is the outer dim
    auto& all = model_placements_[name];
    all.insert(all.end(), placements.begin(), placements.end());
  }
  for (auto& line : tp.setup_lines) plan_.setup_lines.push_back(std::move(line));
}

// After tensor parallelism: the loss it computes is what context parallelism feeds this rank's targets.
void Parallelizer::apply_context_parallel() {
  ContextParallelPlan cp = as_config_error([&] { return apply_cp(model_, *plan_.mesh, c_.context, plan_.loss); });
  if (!cp.loss) return;
  plan_.loss = std::move(cp.loss);
  plan_.model_parallel_groups.push_back(plan_.mesh->group("cp"));
  for (auto& line : cp.setup_lines) plan_.setup_lines.push_back(std::move(line));
}

// The gradient elements of parameters cut over tp, where this rank's gradients hold them: each
// rank's slice counts in the global norm, while the replicated parameters count once.
void Parallelizer::find_split_gradients() {
  if (plan_.mesh->size("tp") == 1) return;
  plan_.split_gradients.spans = gradient_spans([](const HeldParameter& p) {
    return std::any_of(p.spec.placements.begin(), p.spec.placements.end(),
                       [](const auto& dim) { return dim.first == "tp" && dim.second.kind == Placement::Kind::Shard; });
  });
  plan_.split_gradients.group = plan_.mesh->group("tp").get();
}

// Pipeline stages hold different parameters, whose squares the global norm sums over pp; a tied
// embedding's second copy (on the stage that does not write it) is the same gradient, counted once.
void Parallelizer::find_stage_gradients() {
  if (!plan_.pipeline) return;
  plan_.stage_gradients.duplicated = gradient_spans([&](const HeldParameter& p) {
    return std::any_of(p.spec.placements.begin(), p.spec.placements.end(), [&](const auto& dim) {
      return dim.first == "pp" && dim.second.kind == Placement::Kind::Stages && dim.second.stages.front() != plan_.mesh->coord("pp");
    });
  });
  plan_.stage_gradients.group = plan_.pipeline->pp.get();
}

// Where this rank's gradients hold the trained parameters `which` picks, sorted.
Spans Parallelizer::gradient_spans(const std::function<bool(const HeldParameter&)>& which) const {
  const bool grads_sharded = plan_.grad_sync->shard_group() != nullptr;
  Spans spans;
  for (const HeldParameter& p : plan_.layout.parameters) {
    if (!p.trained || !which(p)) continue;
    for (const PlacedPiece& piece : grads_sharded ? p.state_pieces : p.pieces) spans.push_back({piece.local_offset, numel(piece.piece)});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.offset < b.offset; });
  return spans;
}

void Parallelizer::apply_precision() {
  model_->set_activation_checkpointing(c_.activation_checkpointing);
  for (auto& line : apply_activation_store(model_, c_, *plan_.mesh, world_.device())) plan_.setup_lines.push_back(std::move(line));
  precision_ = MixedPrecision::make(c_.precision, world_.device());
  precision_.round_gradients = c_.grad_accum_16bit;
  model_->set_precision(precision_);
  if (c_.precision == at::kHalf) plan_.scaler = std::make_unique<LossScaler>(c_.loss_scaler);
  matmul_only_ = model_->matmul_only_weights();
}

void Parallelizer::apply_data_parallel(std::vector<std::pair<std::string, at::Tensor>> named) {
  parts_ = model_->forward_parts();
  named = group_matmul_weights(named, ParameterParts(parts_), matmul_only_);
  // Stages 2 and 3 keep no whole gradient: autograd's per-parameter gradients go into reduce-scatter
  // buckets. Stage 3 keeps no whole parameters either: they move into per-unit buffers.
  plan_.flat = std::make_unique<FlatParameters>(named, c_.zero_stage == 3   ? FlatParameters::Buffers::None
                                                       : c_.zero_stage == 2 ? FlatParameters::Buffers::Parameters
                                                                            : FlatParameters::Buffers::ParametersAndGradients);
  FlatParameters& flat = *plan_.flat;
  DataParallelOptions options;
  options.bucket_bytes = c_.reduce_bucket_elements * flat.options().dtype().itemsize();
  if (c_.grad_accum_16bit) options.wire_dtype = c_.precision;
  options.kept_whole = kept_whole();
  // ZeRO shards over the data-parallel ranks of one replica (all of them without hybrid sharding);
  // whole gradients are averaged over every rank that holds a copy of them.
  const DeviceMesh& mesh = *plan_.mesh;
  group_ = mesh.group("dp_shard_cp");
  if (c_.zero_stage == 3) {
    const ParameterParts parts(parts_);
    const std::vector<at::Tensor> gathered_16bit = precision_.enabled() ? matmul_only_ : std::vector<at::Tensor>{};
    std::vector<GradBucket> units = make_unit_buckets(flat.entries(), parts, gathered_16bit, {}, options.kept_whole);
    const RowSplit split = table_split(units);
    if (!split.name.empty()) units = make_unit_buckets(flat.entries(), parts, gathered_16bit, split, options.kept_whole);
    shard_parameters(group_, units, options, split);
  } else if (c_.zero_stage == 2) {
    auto reduce_scatter = std::make_unique<ReduceScatterGrads>(flat, group_, options);
    reduce_scatter->average_across(mesh.group("dp_replicate"));
    plan_.grad_sync = std::move(reduce_scatter);
  } else {
    plan_.grad_sync = std::make_unique<DataParallel>(flat, mesh.group("dp_cp"), options);
  }
  for (const auto& [what, device] : {std::pair<std::string, std::string>{"optimizer", c_.offload_optimizer.device},
                                     {"param", c_.offload_param.device}}) {
    if (device == "cpu" && world_.device().is_cpu())
      plan_.setup_lines.push_back("zero_optimization.offload_" + what + ".device=cpu: this run computes on the CPU, so the " +
                                  (what == "param" ? "parameters" : "optimizer state") + " already live in host memory; nothing moves");
  }
  // Every rank owns 1/dp of every bucket: under ZeRO the pieces it updates, holds and writes.
  shards_ = std::make_unique<BucketShards>(plan_.sharded ? plan_.sharded->shards()
                                                         : BucketShards(plan_.grad_sync->buckets(), group_->size(), group_->rank()));
  std::vector<MeshCoordinate> coords;
  for (const MeshDim& dim : mesh.dims()) coords.push_back({dim.name, mesh.coord(dim.name), dim.size});
  plan_.layout = data_parallel_layout(c_.model, model_, flat, plan_.updated_parameters(), *shards_, c_.zero_stage, coords, model_placements_,
                                      [this](const std::string& name) { return c_.freezes(name); }, options.kept_whole);
  find_kept_whole();
  find_split_gradients();
  find_stage_gradients();
}

// Where the parameters kept whole lie in this rank's shard (and its gradient shard at stages 2 and 3).
void Parallelizer::find_kept_whole() {
  if (c_.modules.kept_whole.empty()) return;
  for (const HeldParameter& p : plan_.layout.parameters) {
    if (!p.trained || !c_.modules.keeps_whole(p.spec.name)) continue;
    for (const PlacedPiece& piece : p.state_pieces) plan_.kept_whole.push_back({piece.local_offset, numel(piece.piece)});
  }
  std::sort(plan_.kept_whole.begin(), plan_.kept_whole.end(), [](const Span& a, const Span& b) { return a.offset < b.offset; });
}

// ZeRO stage 3 cuts a tied token table into units of rows no larger than the largest other unit,
// which the lookup and the head read block by block (parallel/zero/sharded_table.h), where the model
// computes both on this rank in one pass: not under tensor parallelism (whose lookup and head split
// the vocabulary themselves), nor under a pipeline (which holds every unit whole for its step), nor
// with 16-bit gathers of the table (param_dtype), which round the position embedding gathered with it,
// nor when parallel.modules keeps the table whole (no unit of it is gathered).
RowSplit Parallelizer::table_split(const std::vector<GradBucket>& units) const {
  const std::string name = c_.model.llm_prefix() + "wte.weight";
  const auto& entries = plan_.flat->entries();
  const auto table = std::find_if(entries.begin(), entries.end(), [&](const FlatEntry& e) { return e.name == name; });
  if (!c_.model.tie_embeddings || !model_->parts().embedding || !model_->parts().head || plan_.mesh->size("tp") > 1 || plan_.pipeline ||
      c_.gather_16bit || table == entries.end() || c_.modules.keeps_whole(name))
    return {};
  int64_t largest = 0;
  for (const GradBucket& u : units) {
    const int index = int(table - entries.begin());
    if (index < u.first_entry || index >= u.first_entry + u.entries) largest = std::max(largest, u.numel);
  }
  if (largest == 0 || table->numel <= largest) return {};
  return {name, c_.model.d_model, largest};
}

// ZeRO stage 3: the parameters live in per-unit shards, gathered around each part of the model.
void Parallelizer::shard_parameters(const std::shared_ptr<Group>& group, const std::vector<GradBucket>& units,
                                    const DataParallelOptions& options, const RowSplit& split) {
  if (!world_.device().is_cpu() && c_.offload_param.device != "none" && c_.offload_optimizer.device == "none")
    throw ConfigError("zero_optimization.offload_param.device=" + c_.offload_param.device + " on a " + world_.device().str() +
                      " run needs zero_optimization.offload_optimizer.device \"cpu\" or \"nvme\" too: the optimizer updates the " +
                      "parameter shard where it lives, on the host");
  // Sharded and the whole units given back before anything of the model's size is allocated beside them (that would be the peak).
  plan_.sharded = std::make_unique<FullyShardedParameters>(*plan_.flat, units, parts_, group, c_.reshard_after_forward);
  FullyShardedParameters& sharded = *plan_.sharded;
  if (c_.offload_param.device == "nvme") keep_shard_on_nvme();
  if (c_.offload_param.device == "cpu" && !world_.device().is_cpu()) {
    sharded.keep_shard_on_host();
    plan_.setup_lines.push_back("zero_optimization.offload_param.device=cpu: the parameter shard (" + mib(sharded.shard().nbytes()) +
                                " MiB) in host memory, copied to the " + world_.device().str() + " piece by piece as each unit is gathered");
  }
  if (precision_.enabled()) {
    std::vector<Linear> layers = model_->matmul_layers();
    std::vector<std::pair<at::Tensor, at::Tensor*>> working;
    for (auto& layer : layers) working.emplace_back(layer->weight, &layer->working);
    sharded.keep_working_copies(precision_.compute, working, matmul_only_, c_.gather_16bit);
  }
  broadcast(*plan_.mesh->group("dp_cp"), sharded.unit_buffers(), 0, "broadcast parameters");  // every rank starts from rank 0's
  sharded.reshard();
  plan_.setup_lines.push_back("host memory: " + mib(release_freed_host_memory()) + " MiB of the whole units given back once sharded");
  auto reduce_scatter = std::make_unique<ReduceScatterGrads>(*plan_.flat, group, options, units);
  reduce_scatter->average_across(plan_.mesh->group("dp_replicate"));
  reduce_scatter->on_gradients_taken([s = &sharded](int unit) { s->gradients_taken(unit); });
  if (!split.name.empty()) {
    auto table = std::make_unique<ShardedTable>(sharded, *reduce_scatter, units, plan_.flat->entries(), split);
    plan_.setup_lines.push_back("zero-3: " + split.name + " in " + std::to_string(table->blocks()) + " units of rows (at most " +
                                mib(table->largest_block_numel() * int64_t(plan_.flat->options().dtype().itemsize())) +
                                " MiB each, no more than a block's), read and reduced block by block by the lookup and the tied head");
    plan_.row_table = std::move(table);
    model_->set_row_blocked_table(plan_.row_table.get());
  }
  plan_.grad_sync = std::move(reduce_scatter);
  model_->set_part_hooks(&sharded);
}

// ZeRO-3's parameter shard in a file under nvme_path (parallel/zero/fully_sharded_parameters.h).
void Parallelizer::keep_shard_on_nvme() {
  const std::string key = "zero_optimization.offload_param";
  offload_to_nvme(key, [&] { plan_.sharded->keep_shard_in_file(c_.offload_param.nvme_path); });
  plan_.setup_lines.push_back(key + ".device=nvme: the parameter shard (" + mib(plan_.sharded->shard().nbytes()) +
                              " MiB) in an unnamed file under " + printable(c_.offload_param.nvme_path) +
                              ", read piece by piece for each gather and " +
                              (c_.offload_optimizer.device == "nvme" ? "streamed through the optimizer's buffers with its state"
                                                                     : "mapped for the optimizer step, its pages dropped after it"));
}

void Parallelizer::make_optimizer() {
  if (c_.zero_stage == 0) {
    plan_.optimizer = make_flat_optimizer(c_.optimizer, plan_.flat->data());
    return;
  }
  owned_numel_ = shards_->owned_numel();
  auto inner = make_shard_optimizer(c_, world_.device(), *plan_.flat, plan_.sharded.get(), shards_->shard_numel(), plan_.setup_lines);
  std::unique_ptr<ParameterAllGather> gather;
  if (!plan_.sharded) {  // stages 1 and 2: the updated pieces come back during the next forward pass
    gather = std::make_unique<ParameterAllGather>(*shards_, group_, plan_.flat->entries(), ParameterParts(parts_));
    plan_.parameter_gather = gather.get();
    model_->set_part_hooks(plan_.parameter_gather);
  }
  plan_.optimizer = std::make_unique<ZeroOptimizer>(std::move(inner), std::move(*shards_), c_.zero_stage, std::move(gather));
}

}  // namespace

ParallelPlan parallelize(Transformer& model, World& world, std::shared_ptr<DeviceMesh> mesh, const TrainConfig& config) {
  return Parallelizer(model, world, std::move(mesh), config).run();
}

}  // namespace dtrain
