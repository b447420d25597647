#include "parallel/tensor/column_parallel_linear.h"

#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/custom_function.h>

#include "comm/collectives.h"
#include "model/fused/token_sum.h"
#include "model/linear_gemm.h"

namespace dtrain {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What backward needs of one call besides the saved tensors.
struct ColumnCall : torch::CustomClassHolder {
  std::shared_ptr<Group> group;
  bool sequence_parallel = false, overlap = true;
  MixedPrecision mp;
  std::vector<bool> has_bias;
  std::vector<ColumnParallelLinear::Rows> rows;  // count 0: the layer's whole (sharded) weight
  std::vector<std::vector<int64_t>> weight_shapes;
};

const char* kLabel = "column_parallel_linear";

// The sequence (dim 1) of every rank's shard, in group-rank order: all_gather stacks the shards on
// dim 0, so they are laid side by side afterwards.
struct SequenceGather {
  at::Tensor stacked;
  CommHandle handle;
  int n = 1;

  SequenceGather(Group& g, const at::Tensor& shard, const std::string& label) : n(g.size()) {
    const at::Tensor in = shard.contiguous();
    auto sizes = in.sizes().vec();
    sizes[0] *= n;
    stacked = at::empty(sizes, in.options());
    handle = all_gather_async(g, in, stacked, label);
  }
  // The sequence in order; the gathered buffer is given back at once (a backward holding it to its
  // end kept a second copy of the whole input through the weight-gradient GEMMs).
  at::Tensor wait() {
    handle.wait();
    const at::Tensor whole = at::cat(stacked.chunk(n, 0), 1);
    stacked = at::Tensor();
    return whole;
  }
};

struct ColumnParallelFunction : public torch::autograd::Function<ColumnParallelFunction> {
  // inputs: x, then per layer its GEMM operand (the weight, or its 16-bit working copy, narrowed to
  // the rows it computes), its weight and its bias if it has one.
  static variable_list forward(AutogradContext* ctx, c10::intrusive_ptr<ColumnCall> call, at::TensorList inputs) {
    const MixedPrecision& mp = call->mp;
    at::Tensor x = mp.enabled() ? inputs[0].to(mp.compute) : inputs[0];
    const at::Tensor shard = x;
    if (call->sequence_parallel) x = SequenceGather(*call->group, x, std::string(kLabel) + " forward: gather the sequence").wait();
    std::vector<at::Tensor> saved{shard};
    variable_list out;
    size_t i = 1;
    for (size_t l = 0; l < call->has_bias.size(); ++l) {
      const at::Tensor& operand = inputs[i];
      saved.push_back(operand);
      const at::Tensor bias = call->has_bias[l] ? narrow_rows(inputs[i + 2], call->rows[l]) : at::Tensor();
      i += call->has_bias[l] ? 3 : 2;
      if (!mp.enabled()) {
        out.push_back(matmul_nt(x, operand, bias));
        continue;
      }
      at::Tensor y = gemm_nt(mp, x, operand, mp.native_gemm ? mp.compute : at::kFloat);
      if (bias.defined()) y = y + (mp.native_gemm ? bias.to(mp.compute) : bias);
      out.push_back(y.to(mp.compute));
    }
    ctx->save_for_backward(saved);
    ctx->saved_data["call"] = c10::IValue::make_capsule(std::move(call));
    ctx->saved_data["x_type"] = int64_t(inputs[0].scalar_type());
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto call = c10::static_intrusive_pointer_cast<ColumnCall>(ctx->saved_data["call"].toCapsule());
    const auto x_type = at::ScalarType(ctx->saved_data["x_type"].toInt());
    const MixedPrecision& mp = call->mp;
    Group& group = *call->group;
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& shard = saved[0];
    const size_t layers = call->has_bias.size();
    // Gathered again behind the input-gradient GEMMs.
    std::unique_ptr<SequenceGather> gather;
    if (call->sequence_parallel) gather = std::make_unique<SequenceGather>(group, shard, std::string(kLabel) + " backward: gather the sequence");
    std::vector<at::Tensor> g(layers);
    at::Tensor gx;
    for (size_t l = 0; l < layers; ++l) {
      const at::Tensor& operand = saved[l + 1];
      // An output that did not reach the loss: a zero gradient, so every rank still communicates.
      g[l] = grad_outputs[l].defined() ? mp.operand(grad_outputs[l]) : at::zeros({}, operand.options());
      if (!grad_outputs[l].defined()) continue;
      const at::Tensor part = gemm_nt(mp, g[l], operand.t(), mp.enabled() ? mp.compute : at::kFloat).to(x_type);
      gx = gx.defined() ? gx + part : part;
    }
    // Every rank's slice of the outputs contributes to the whole input's gradient.
    at::Tensor gx_out;
    CommHandle reduce;
    const std::string label = std::string(kLabel) + " backward: input gradient";
    if (call->sequence_parallel) {
      const at::Tensor stacked = at::cat(gx.chunk(group.size(), 1), 0);
      auto sizes = gx.sizes().vec();
      sizes[1] /= group.size();
      gx_out = at::empty(sizes, gx.options());
      reduce = reduce_scatter_async(group, stacked, gx_out, ReduceOp::Sum, label);
      gx = at::Tensor();  // the reduction reads its reordered copy
    } else {
      gx_out = gx.contiguous();
      reduce = all_reduce_async(group, gx_out, ReduceOp::Sum, label);
    }
    if (!call->overlap) reduce.wait();
    // The weight gradients are computed here even while a DeferWeightGrads guard is alive
    // (model/weight_grad_store.h): these GEMMs are what the input gradient's reduction overlaps, and
    // deferring them would leave it nothing to hide behind but the next stage's wait for it; under
    // sequence parallelism they also read the input gathered again just above, which a deferred
    // closure would have to keep whole (tp times this rank's shard) until the schedule's W.
    const at::Tensor x = gather ? gather->wait() : shard;
    const at::Tensor x2 = x.reshape({-1, x.size(-1)});
    variable_list grads{at::Tensor(), gx_out};
    std::vector<CommHandle> shared;  // weight gradients of rows several ranks compute
    for (size_t l = 0; l < layers; ++l) {
      const at::Tensor g2 = g[l].dim() == 0 ? g[l] : g[l].reshape({-1, g[l].size(-1)});
      at::Tensor gw, gb;
      if (g[l].dim() > 0) {
        gw = mp.kept_gradient(gemm_nt(mp, g2.t(), x2.t(), at::kFloat));
        if (call->has_bias[l]) gb = mp.kept_gradient(sum_over_tokens_fp32(g2));  // as MixedLinear
      }
      grads.push_back(at::Tensor());  // the operand
      const ColumnParallelLinear::Rows rows = call->rows[l];
      if (rows.count > 0) {
        gw = whole_rows(gw, rows, call->weight_shapes[l], shared, group);
        if (call->has_bias[l]) gb = whole_rows(gb, rows, {call->weight_shapes[l][0]}, shared, group);
      }
      grads.push_back(gw);
      if (call->has_bias[l]) grads.push_back(gb);
    }
    reduce.wait();
    for (auto& h : shared) h.wait();
    return grads;
  }

  static at::Tensor narrow_rows(const at::Tensor& t, ColumnParallelLinear::Rows rows) {
    return rows.count > 0 ? t.narrow(0, rows.begin, rows.count) : t;
  }

  // The gradient of a whole weight (or bias) of `shape` of which this rank computed `rows`: zeros
  // elsewhere, summed over the ranks (started here, waited for with the input gradient).
  static at::Tensor whole_rows(const at::Tensor& part, ColumnParallelLinear::Rows rows, at::IntArrayRef shape,
                               std::vector<CommHandle>& handles, Group& group) {
    at::Tensor whole = at::zeros(shape, part.options());
    whole.narrow(0, rows.begin, rows.count).copy_(part);
    handles.push_back(all_reduce_async(group, whole, ReduceOp::Sum, std::string(kLabel) + " backward: gradient of rows several ranks compute"));
    return whole;
  }
};

}  // namespace

std::vector<at::Tensor> ColumnParallelLinear::operator()(const at::Tensor& x, const std::vector<LinearImpl*>& layers) const {
  auto call = c10::make_intrusive<ColumnCall>();
  call->group = group_;
  call->sequence_parallel = sequence_parallel_;
  call->overlap = overlap_;
  call->mp = layers.front()->precision();
  std::vector<at::Tensor> inputs{x};
  for (LinearImpl* layer : layers) {
    const auto found = rows_.find(layer);
    const Rows rows = found == rows_.end() ? Rows{} : found->second;
    const at::Tensor& operand = call->mp.enabled() ? layer->working : layer->weight;
    TORCH_CHECK(operand.defined(), "column_parallel_linear: a layer's working copy is missing (refresh_working_copy not called?)");
    inputs.push_back(ColumnParallelFunction::narrow_rows(operand, rows));
    inputs.push_back(layer->weight);
    if (layer->bias.defined()) inputs.push_back(layer->bias);
    call->has_bias.push_back(layer->bias.defined());
    call->rows.push_back(rows);
    call->weight_shapes.push_back(layer->weight.sizes().vec());
  }
  return ColumnParallelFunction::apply(std::move(call), at::TensorList(inputs));
}

}  // namespace dtrain
