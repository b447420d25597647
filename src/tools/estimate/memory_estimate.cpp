#include "tools/estimate/memory_estimate.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "model/parameter_shapes.h"
#include "tools/estimate/model_states.h"
#include "tools/estimate/pipeline_stage.h"
#include "tools/estimate/step_peak.h"

namespace dtrain {

namespace {

// What a rank takes besides its tensors. On the CPU build: the process with LibTorch's code and its
// threads, 140 MiB (a rank of the tiny model measures 146 MiB of peak RSS, under 2 MiB of it
// tensors); malloc's slack comes on top (docs/training.md, "Host memory"). On a GPU: the CUDA
// context, the kernels it loads and the libraries' own allocations, 750 MiB (an H200 with PyTorch
// 2.11: the driver's count for the process less the caching allocator's reserved peak measured
// 742-758 MiB on a 10M-parameter model and ~800 MiB on a 300M one; docs/benchmarks.md, "On a GPU").
// What the caching allocator reserves beyond its allocations comes on top.
constexpr double kCpuRuntimeBytes = 140.0 * (1 << 20);
constexpr double kGpuRuntimeBytes = 750.0 * (1 << 20);
// cuBLAS's workspaces, which it takes from the caching allocator: 32 MiB for the first GEMM of each
// thread and 1 MiB for cuBLASLt's (measured on an H200 with PyTorch 2.11, the defaults for compute
// capability 9.0). A rank multiplies on its own thread in forward and on autograd's device thread in
// backward.
constexpr double kCublasWorkspaceBytes = 2 * 33.0 * (1 << 20);

MemoryTerm runtime_term(const MemoryLayout& l) {
  return l.device_is_cpu ? MemoryTerm{"runtime: the process and LibTorch (not tensors)", MemoryKind::Runtime, MemoryPlace::Device,
                                      kCpuRuntimeBytes, "140 MiB"}
                         : MemoryTerm{"runtime: CUDA context and kernels (not tensors)", MemoryKind::Runtime, MemoryPlace::Device,
                                      kGpuRuntimeBytes, "750 MiB"};
}

// Frozen parameters change what autograd saves and computes wherever they are not the embeddings
// (a frozen matmul weight needs no saved input for its gradient, a frozen prefix of blocks runs
// forward only); freezing only the embeddings changes no activation, only which gradients exist.
// A vision-language model's whole encoder frozen is such a prefix: it records no graph at all
// (vision_memory.h), which the estimate models.
bool is_embedding(const MemoryLayout& l, const std::string& name) {
  const std::string p = l.model.llm_prefix();
  return name == p + "wte.weight" || name == p + "wpe.weight";
}

bool is_vision_encoder(const std::string& name) { return name.rfind("vision.", 0) == 0; }

// Whether every parameter of the vision encoder is frozen (a part of it frozen is not modelled).
bool encoder_frozen(const MemoryLayout& l) {
  if (!l.model.is_vlm()) return false;
  const std::set<std::string> frozen(l.frozen.begin(), l.frozen.end());
  for (const ParameterShape& s : parameter_shapes(l.model))
    if (is_vision_encoder(s.name) && !frozen.count(s.name)) return false;
  return true;
}

// A vision-language model is modelled under DDP, ZeRO 1-3, tp with or without sp (its vision side
// whole on every tp rank), every precision whose 16-bit GEMMs are native (uncovered_layout)
// and every checkpointing mode (which reaches the LLM's blocks alone). Its config refuses cp and pp; a
// planner's candidate with cp is refused here.
std::string uncovered_vision(const MemoryLayout& l) {
  if (!l.model.is_vlm() || l.cp == 1) return "";
  return "a vision-language model (model.arch=vlm) under cp " + std::to_string(l.cp);
}

std::string uncovered_module_plan(const MemoryLayout& l) {
  if (l.frozen.empty() && l.kept_whole.empty()) return "";
  const bool encoder = encoder_frozen(l);
  const bool frozen_encoder_alone =
      encoder && std::all_of(l.frozen.begin(), l.frozen.end(), [](const std::string& n) { return is_vision_encoder(n); });
  // Modelled: the embeddings and a whole vision encoder frozen, alone or together (under tp their
  // counts are this rank's pieces, model_states.h: the table's rows of the vocabulary, the position
  // table and the encoder whole, as apply_tp.cpp holds them; kept-whole weights their slices), and
  // blocks frozen whole from the first behind frozen embeddings, which run forward only
  // (model_states.h; under pp those of the model's first chunk).
  const int forward_only = forward_only_blocks(l);
  for (const std::string& name : l.frozen) {
    if (is_embedding(l, name) || (encoder && is_vision_encoder(name))) continue;
    if (const std::optional<int> block = block_of(l.model, name); block && *block < forward_only) continue;
    return "frozen " + name +
           " (train.freeze, parallel.modules: only frozen embeddings, the blocks from the first frozen whole behind them "
           "and a whole frozen vision encoder are modelled)";
  }
  // A frozen weight's 16-bit working copy lives outside every ZeRO-3 unit: counted for the frozen
  // encoder (model_states.h), whose matmul weights are known; a frozen table's is not measured yet.
  if (!l.frozen.empty() && l.zero_stage == 3 && l.compute_bytes < 4 && !frozen_encoder_alone)
    return "frozen parameters other than a whole vision encoder under ZeRO stage 3 with bf16 or fp16";
  return "";
}

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace

double RankEstimate::bytes(MemoryPlace place) const {
  double sum = 0;
  for (const auto& t : terms)
    if (t.place == place) sum += t.bytes;
  return sum;
}

double RankEstimate::tensor_bytes() const {
  double sum = 0;
  for (const auto& t : terms)
    if (t.place == MemoryPlace::Device && t.kind != MemoryKind::Runtime) sum += t.bytes;
  return sum;
}

const MemoryTerm& RankEstimate::largest() const {
  const MemoryTerm* best = nullptr;
  for (const auto& t : terms)
    if (t.place == MemoryPlace::Device && t.kind != MemoryKind::Runtime && (!best || t.bytes > best->bytes)) best = &t;
  if (!best) throw std::logic_error("a rank estimate without device tensors");
  return *best;
}

const RankEstimate& MemoryEstimate::of_stage(int stage) const {
  for (const RankEstimate& r : ranks)
    if (r.stage == stage) return r;
  return most_loaded();
}

const RankEstimate& MemoryEstimate::most_loaded() const {
  if (ranks.empty()) throw std::logic_error("most_loaded() of " + (no_estimate.empty() ? std::string("an empty estimate") : no_estimate));
  return *std::max_element(ranks.begin(), ranks.end(),
                           [](const RankEstimate& a, const RankEstimate& b) { return a.device_bytes() < b.device_bytes(); });
}

std::string uncovered_layout(const MemoryLayout& l) {
  std::vector<std::string> parts;
  const std::string vision = uncovered_vision(l);
  if (!vision.empty()) parts.push_back(vision);
  parts.insert(parts.end(), l.unmodelled.begin(), l.unmodelled.end());
  // Without native 16-bit GEMMs (bf16 on a CPU without AVX512-BF16, fp16 without AVX512-FP16) every
  // GEMM and the attention widen their operands to fp32 copies (model/mixed_precision.h): the head's
  // were traced, the blocks' not yet, and the tiny and demo models measure 11-17% over the native
  // formulas in fp16 on an AVX512-BF16 CPU. No estimate rather than one that is low.
  if (l.compute_bytes < 4 && !l.native_gemm)
    parts.push_back("16-bit compute without native 16-bit GEMMs on this device (bf16 needs AVX512-BF16, fp16 AVX512-FP16 on a CPU)");
  const std::string pp = "pp " + std::to_string(l.pp);
  // Where a stage's peak lies inside ring attention's backward, its k/v hops, dq and dk/dv
  // accumulators (held until a peer's send completes) add what no term models: measured on the tiny
  // model at pp 2 × cp 2, zero_bubble (whose deferred weight gradients keep them past the backward)
  // +8% and +10%, and selective recomputation (the first stage's peak inside the recomputed ring
  // attention) +5.3%. The other schedules and modes measure within 1% (step_peak.cpp's batch_tokens).
  if (l.pp > 1 && l.cp > 1 && (l.schedule == ScheduleKind::ZeroBubble || l.activation_checkpointing.attention_core()))
    parts.push_back(pp + " with cp " + std::to_string(l.cp) + " under " +
                    (l.schedule == ScheduleKind::ZeroBubble ? "the zero_bubble schedule" : "selective activation checkpointing"));
  const std::string plan = uncovered_module_plan(l);
  if (!plan.empty()) parts.push_back(plan);
  // The run itself refuses the parameter shard offloaded without the optimizer on a GPU (parallelize.cpp).
  if (!l.device_is_cpu && l.offload_param != "none" && l.offload_optimizer == "none")
    parts.push_back("zero_optimization.offload_param.device=" + l.offload_param + " without offload_optimizer on a GPU");
  return joined(parts);
}

const std::vector<std::string>& covered_layouts() {
  static const std::vector<std::string> layouts = {
      "data parallelism: DDP (ZeRO stage 0) and ZeRO stages 1, 2 and 3 (reshard_after_forward true or false, hybrid shard groups)",
      "tensor parallelism (Megatron-LM's layout, the vocab-parallel head and loss), with or without sequence parallelism",
      "pipeline parallelism under the gpipe, 1f1b and interleaved_1f1b schedules (every stage's own estimate), with DDP, ZeRO stages "
      "1-3, one micro-batch a step or more; zero_bubble in fp32, bf16 or fp16 at every ZeRO stage and activation-checkpointing mode, "
      "with or without tp",
      "context parallelism, ring or Ulysses attention",
      "tp, pp and cp combined: tp × pp, tp × cp, dp × pp and pp × cp (not pp × cp under zero_bubble or selective recomputation)",
      "activation checkpointing: none, full, selective, every:N (checkpointed inputs partitioned over tp, or in "
      "contiguous_memory_optimization's buffer of number_checkpoints slots, or in host memory on a GPU: cpu_checkpointing)",
      "precision: fp32, bf16 and fp16 (fp32 master weights, 16-bit working copies) where the device has native 16-bit GEMMs (a CPU: AVX512-BF16 for bf16, AVX512-FP16 for fp16), "
      "with fp32 or 16-bit gradient accumulation (data_types.grad_accum_dtype), ZeRO-3 gathers in 16 bits (parallel.fsdp.param_dtype)",
      "models: GPT-2 and Llama shapes (grouped-query attention, tied or untied embeddings)",
      "optimizers: AdamW, Adam, SGD (with or without momentum)",
      "frozen embeddings (train.freeze, parallel.modules; under tp this rank's rows of the table) and parallel.modules' stage-0 "
      "modules kept whole inside ZeRO 1-3, without tp (under pp each stage's own: a tied table frozen on both ends)",
      "vision-language models (model.arch=vlm) in fp32 and bf16 under DDP, ZeRO 1-3 and tp with or without sp (the vision side whole on every tp rank) "
      "and every activation-checkpointing mode (the LLM's blocks alone recomputed), every image at the largest grid the config allows, "
      "the vision encoder trained or frozen whole (train.freeze, parallel.modules; under tp too)",
      "ZeRO offload to NVMe (optimizer state at stages 1-3, the parameter shard at stage 3) and to the CPU (nothing moves on the CPU "
      "build; on a GPU the states on the host, unmeasured)"};
  return layouts;
}

MemoryEstimate estimate_memory(const MemoryLayout& l) {
  MemoryEstimate out;
  out.no_estimate = uncovered_layout(l);
  if (!out.no_estimate.empty()) {
    out.no_estimate = "no estimate for " + out.no_estimate;
    return out;
  }
  const ParameterCounts whole = parameter_counts(l.model, l.tp);
  for (const PipelineStage& stage : pipeline_stages(l)) {
    const ParameterCounts counts = with_module_plan(stage_parameter_counts(whole, l.model, stage), l, stage);
    RankEstimate rank;
    const std::string chunks = stage.chunks.size() > 1 ? " in " + std::to_string(stage.chunks.size()) + " chunks" : "";
    rank.ranks = stage.pipelined() ? "pipeline stage " + std::to_string(stage.stage) + " (" + std::to_string(stage.blocks) + " blocks" + chunks +
                                         (stage.first ? ", the embeddings" : "") + (stage.last ? ", the head" : "") + ")"
                                   : "every rank";
    rank.stage = stage.stage;
    rank.count = l.dp * l.tp * l.cp * (stage.pipelined() ? 1 : l.pp);
    rank.terms = model_state_terms(l, counts);
    const std::vector<StepMoment> moments = step_moments(l, counts, stage);
    const StepMoment& peak = *std::max_element(moments.begin(), moments.end(),
                                               [](const StepMoment& a, const StepMoment& b) { return a.bytes() < b.bytes(); });
    rank.peak_moment = peak.name;
    rank.terms.insert(rank.terms.end(), peak.terms.begin(), peak.terms.end());
    if (!l.device_is_cpu)
      rank.terms.push_back({"cuBLAS workspaces: the rank's thread's and autograd's", MemoryKind::Workspaces, MemoryPlace::Device,
                            kCublasWorkspaceBytes, "2 × (32 + 1) MiB"});
    rank.terms.push_back(runtime_term(l));
    out.ranks.push_back(std::move(rank));
  }
  return out;
}

std::string memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Parameters: return "parameters";
    case MemoryKind::Gradients: return "gradients";
    case MemoryKind::OptimizerStates: return "optimizer states";
    case MemoryKind::Activations: return "activations";
    case MemoryKind::Communication: return "communication";
    case MemoryKind::Workspaces: return "workspaces";
    case MemoryKind::Runtime: return "runtime";
  }
  return "?";
}

std::string memory_place_name(MemoryPlace place) {
  switch (place) {
    case MemoryPlace::Device: return "device";
    case MemoryPlace::Host: return "host";
    case MemoryPlace::Nvme: return "nvme";
  }
  return "?";
}

}  // namespace dtrain
