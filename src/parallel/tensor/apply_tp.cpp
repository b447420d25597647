#include "parallel/tensor/apply_tp.h"

#include <ATen/core/grad_mode.h>

#include <optional>
#include <stdexcept>

#include "comm/mappings.h"
#include "model/parameter_shapes.h"
#include "parallel/tensor/column_parallel_linear.h"
#include "parallel/tensor/row_parallel_linear.h"
#include "parallel/tensor/tp_cut.h"
#include "parallel/tensor/vocab_parallel_cross_entropy.h"
#include "parallel/tensor/vocab_parallel_embedding.h"
#include "parallel/tensor/vocab_range.h"

namespace dtrain {

namespace {

// Keeps elements [begin, begin + count) of `dim`: the parameter stays the same tensor (the model, a
// tied head and the frozen list hold it), with the slice as its data.
void keep_slice(at::Tensor& parameter, int dim, int64_t begin, int64_t count) {
  at::NoGradGuard no_grad;
  parameter.set_data(parameter.detach().narrow(dim, begin, count).clone());
}

void require_divides(int tp, int64_t n, const std::string& what) {
  if (n % tp != 0)
    throw std::invalid_argument("parallel.tp " + std::to_string(tp) + " does not divide " + what + " " + std::to_string(n));
}

class TensorParallelizer {
 public:
  TensorParallelizer(Transformer& model, const DeviceMesh& mesh, const TensorParallelOptions& options)
      : model_(model),
        c_(model->config()),
        group_(mesh.group("tp")),
        tp_(group_->size()),
        rank_(group_->rank()),
        sp_(options.sequence_parallel),
        column_(group_, sp_, options.overlap_grad_reduce),
        row_(group_, sp_) {}

  TensorParallelPlan run() {
    if (tp_ == 1) return {};
    const int64_t hd = c_.head_dim();
    require_divides(tp_, c_.n_head, "model.n_head");
    require_divides(tp_, c_.ff_dim(), "the MLP's features");
    const int64_t kv = c_.kv_heads();
    replicate_kv_ = kv % tp_ != 0;
    if (replicate_kv_ && tp_ % kv != 0)
      throw std::invalid_argument("parallel.tp " + std::to_string(tp_) + " and the " + std::to_string(kv) +
                                  " key/value heads (model.n_kv_head) do not divide one another");
    q_rows_ = c_.n_head / tp_ * hd;
    kv_rows_ = replicate_kv_ ? hd : kv / tp_ * hd;
    ff_rows_ = c_.ff_dim() / tp_;
    vocab_ = vocab_range(c_.vocab_size, tp_, rank_);
    for (auto& item : model_->named_modules("", false)) place(item.key(), *item.value());
    // Every parameter of the model, those other pipeline stages hold too: the layout is global.
    for (const ParameterShape& s : parameter_shapes(c_))
      if (const auto dim = tp_cut(s.name, replicate_kv_)) plan_.placements[s.name] = {{"tp", Placement::shard(*dim)}};
    model_->set_input_linears([column = std::make_shared<const ColumnParallelLinear>(column_)](
                                  const at::Tensor& x, const std::vector<LinearImpl*>& layers) { return (*column)(x, layers); });
    if (sp_) model_->set_after_embedding([g = group_](const at::Tensor& h) { return split_to_sequence(h, g); });
    plan_.loss = [g = group_, begin = vocab_.first](const at::Tensor& logits, const at::Tensor& targets) {
      return vocab_parallel_cross_entropy(logits, targets, begin, g);
    };
    describe();
    return std::move(plan_);
  }

 private:
  void place(const std::string& name, torch::nn::Module& module) {
    if (is_vision_side(name)) return;  // replicated: every tp rank computes the same image tokens
    const std::string leaf = name.substr(name.rfind('.') + 1);
    if (auto* linear = dynamic_cast<LinearImpl*>(&module)) {
      if (leaf == "q_proj") return column(*linear, rank_ * q_rows_, q_rows_);
      if (leaf == "k_proj" || leaf == "v_proj") return key_value(*linear);
      if (leaf == "gate_proj" || leaf == "up_proj") return column(*linear, rank_ * ff_rows_, ff_rows_);
      if (leaf == "o_proj") return row(*linear, rank_ * q_rows_, q_rows_);
      if (leaf == "down_proj") return row(*linear, rank_ * ff_rows_, ff_rows_);
      if (leaf == "lm_head") return column(*linear, vocab_.first, vocab_.second - vocab_.first);
      throw std::logic_error("tensor parallelism has no layout for layer '" + name + "'");
    }
    if (auto* norm = dynamic_cast<NormImpl*>(&module)) {
      if (sp_) norm->set_parameter_view([g = group_](const at::Tensor& p) { return copy_to_group(p, g); });
      return;
    }
    if (auto* embedding = dynamic_cast<EmbeddingImpl*>(&module); embedding && leaf == "wte") {
      keep_slice(embedding->weight, 0, vocab_.first, vocab_.second - vocab_.first);
      embedding->set_lookup([g = group_, begin = vocab_.first](const at::Tensor& weight, const at::Tensor& tokens) {
        return vocab_parallel_embedding(weight, tokens, begin, g);
      });
    }
  }

  void column(LinearImpl& layer, int64_t begin, int64_t count) {
    keep_slice(layer.weight, 0, begin, count);
    if (layer.bias.defined()) keep_slice(layer.bias, 0, begin, count);
  }

  // Sharded by heads, or whole on every rank with the one head this rank's queries read computed.
  void key_value(LinearImpl& layer) {
    if (!replicate_kv_) return column(layer, rank_ * kv_rows_, kv_rows_);
    const int64_t head = rank_ / (tp_ / c_.kv_heads());
    column_.compute_rows(&layer, {head * kv_rows_, kv_rows_});
  }

  void row(LinearImpl& layer, int64_t begin, int64_t count) {
    keep_slice(layer.weight, 1, begin, count);
    row_.apply_to(layer);
  }

  void describe() {
    const int64_t hd = c_.head_dim();
    std::string line = "tensor parallel: tp " + std::to_string(tp_) + ", this rank " + std::to_string(rank_) + ": query heads " +
                       std::to_string(rank_ * q_rows_ / hd) + ".." + std::to_string((rank_ + 1) * q_rows_ / hd - 1) + ", ";
    line += replicate_kv_ ? "key/value head " + std::to_string(rank_ / (tp_ / c_.kv_heads())) + " (key/value weights replicated: tp > " +
                                std::to_string(c_.kv_heads()) + " key/value heads)"
                          : "key/value heads " + std::to_string(rank_ * kv_rows_ / hd) + ".." + std::to_string((rank_ + 1) * kv_rows_ / hd - 1);
    line += ", MLP features " + std::to_string(rank_ * ff_rows_) + ".." + std::to_string((rank_ + 1) * ff_rows_ - 1) + ", vocabulary rows " +
            std::to_string(vocab_.first) + ".." + std::to_string(vocab_.second - 1) + " of " + std::to_string(c_.vocab_size) +
            " (vocab-parallel cross-entropy)";
    plan_.setup_lines.push_back(line);
    if (sp_)
      plan_.setup_lines.push_back("sequence parallel: norms and residuals on " + std::to_string(tp_) +
                                  " sequence shards; column-parallel layers all-gather their input, row-parallel ones reduce-scatter their output");
  }

  Transformer& model_;
  const TransformerConfig& c_;
  std::shared_ptr<Group> group_;
  int tp_, rank_;
  bool sp_;
  ColumnParallelLinear column_;
  RowParallelLinear row_;
  bool replicate_kv_ = false;
  int64_t q_rows_ = 0, kv_rows_ = 0, ff_rows_ = 0;
  std::pair<int64_t, int64_t> vocab_;
  TensorParallelPlan plan_;
};

}  // namespace

TensorParallelPlan apply_tp(Transformer& model, const DeviceMesh& mesh, const TensorParallelOptions& options) {
  return TensorParallelizer(model, mesh, options).run();
}

}  // namespace dtrain
