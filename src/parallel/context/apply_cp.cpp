#include "parallel/context/apply_cp.h"

#include "parallel/context/ring_attention.h"
#include "parallel/context/sequence_layout.h"
#include "parallel/context/ulysses_attention.h"

namespace dtrain {

namespace {

// "[0,64) [192,256)": the tokens of each sequence a rank holds.
std::string tokens_text(const SequenceLayout& layout, int rank) {
  std::string out;
  for (int chunk : layout.chunks_of(rank))
    out += (out.empty() ? "[" : " [") + std::to_string(chunk * layout.chunk_len()) + "," + std::to_string((chunk + 1) * layout.chunk_len()) + ")";
  return out;
}

}  // namespace

ContextParallelPlan apply_cp(Transformer& model, const DeviceMesh& mesh, const ContextParallelOptions& options, LossFunction loss) {
  ContextParallelPlan plan;
  const int cp = mesh.size("cp");
  if (cp == 1) return plan;
  const std::shared_ptr<Group> group = mesh.group("cp");
  const bool ring = options.impl == ContextImpl::Ring;
  // Causal ring attention balances its work on the zigzag layout; Ulysses attends over the whole
  // sequence gathered in order, which contiguous parts give without a permutation.
  const SequenceLayout layout = SequenceLayout::make(model->config().seq_len, cp, group->rank(), /*zigzag=*/ring);
  model->set_sequence_shard(layout.positions(at::kCPU));
  if (ring) {
    model->set_attention_core([group, layout](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
      return ring_attention(q, k, v, group, layout, /*causal=*/true);
    });
  } else {
    model->set_attention_core([group](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
      return ulysses_attention(q, k, v, group, /*causal=*/true);
    });
  }
  plan.loss = [loss = std::move(loss), layout](const at::Tensor& logits, const at::Tensor& targets) {
    return loss(logits, layout.take(targets, 1));
  };
  plan.setup_lines.push_back("context parallel: cp " + std::to_string(cp) + ", " +
                             (ring ? "ring attention (key/value chunks passed round the cp ranks), zigzag layout"
                                   : "Ulysses (all-to-alls between sequence and head shards), contiguous layout") +
                             ": this rank holds tokens " + tokens_text(layout, group->rank()) + " of each sequence of " +
                             std::to_string(layout.seq_len));
  return plan;
}

}  // namespace dtrain
