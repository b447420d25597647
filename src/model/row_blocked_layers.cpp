#include "model/row_blocked_layers.h"

#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>

namespace dtrain {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Autograd keeps non-tensor state as IValues: the table by address (it outlives the pass).
int64_t address_of(RowBlockedTable* table) { return int64_t(reinterpret_cast<intptr_t>(table)); }
RowBlockedTable& table_at(AutogradContext* ctx) {
  return *reinterpret_cast<RowBlockedTable*>(intptr_t(ctx->saved_data["table"].toInt()));
}

// Runs `use(block, rows)` over every block in order, each whole only around its use and the next
// one gathering meanwhile.
template <typename Use>
void each_block(RowBlockedTable& table, Use use) {
  const int n = table.blocks();
  for (int b = 0; b < n; ++b) {
    const at::Tensor rows = table.acquire(b);
    if (b + 1 < n) table.prefetch(b + 1);
    use(b, rows);
    table.release(b);
  }
}

struct RowBlockedLookup : public torch::autograd::Function<RowBlockedLookup> {
  static at::Tensor forward(AutogradContext* ctx, RowBlockedTable* table, const at::Tensor& weight, const at::Tensor& indices) {
    const at::Tensor flat = indices.reshape({-1});
    at::Tensor out = at::empty({flat.numel(), weight.size(1)}, weight.options());
    each_block(*table, [&](int b, const at::Tensor& rows) {
      const int64_t first = table->first_row(b);
      const at::Tensor here = flat.ge(first).logical_and(flat.lt(table->first_row(b + 1))).nonzero().reshape({-1});
      if (here.numel() > 0) out.index_copy_(0, here, rows.index_select(0, flat.index_select(0, here) - first));
    });
    ctx->save_for_backward({flat});
    ctx->saved_data["table"] = address_of(table);
    std::vector<int64_t> sizes = indices.sizes().vec();
    sizes.push_back(weight.size(1));
    return out.view(sizes);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor flat = ctx->get_saved_variables()[0];
    const at::Tensor& g = grad_outputs[0];
    table_at(ctx).row_gradients(flat, g.reshape({-1, g.size(-1)}).to(at::kFloat).contiguous());
    return {at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct RowBlockedHead : public torch::autograd::Function<RowBlockedHead> {
  static at::Tensor forward(AutogradContext* ctx, RowBlockedTable* table, MixedPrecision mp, const at::Tensor& x, const at::Tensor& /*weight*/) {
    const at::Tensor input = mp.matmul_input(x.reshape({-1, x.size(-1)}));
    const at::ScalarType out = mp.enabled() ? mp.compute : at::kFloat;
    at::Tensor logits = at::empty({input.size(0), table->first_row(table->blocks())}, x.options().dtype(out));
    each_block(*table, [&](int b, const at::Tensor& rows) {
      const int64_t first = table->first_row(b);
      logits.narrow(1, first, rows.size(0)).copy_(gemm_nt(mp, input, mp.matmul_input(rows), mp.native_gemm ? out : at::kFloat));
    });
    ctx->save_for_backward({input});
    ctx->saved_data["table"] = address_of(table);
    ctx->saved_data["compute"] = int64_t(mp.compute);
    ctx->saved_data["native"] = mp.native_gemm;
    ctx->saved_data["round"] = mp.round_gradients;
    ctx->saved_data["x_sizes"] = x.sizes().vec();
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes.back() = logits.size(1);
    return logits.view(sizes);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor input = ctx->get_saved_variables()[0];
    RowBlockedTable& table = table_at(ctx);
    MixedPrecision mp;
    mp.compute = at::ScalarType(ctx->saved_data["compute"].toInt());
    mp.native_gemm = ctx->saved_data["native"].toBool();
    mp.round_gradients = ctx->saved_data["round"].toBool();
    const at::Tensor& g_out = grad_outputs[0];
    const at::Tensor g = mp.operand(g_out.reshape({-1, g_out.size(-1)}));
    const bool input_grad = ctx->needs_input_grad(0);
    at::Tensor dx = input_grad ? at::zeros({input.size(0), input.size(1)}, input.options().dtype(at::kFloat)) : at::Tensor();
    // As each_block, but each block is released before its weight gradient, which reads none of it.
    for (int b = 0; b < table.blocks(); ++b) {
      const at::Tensor rows = table.acquire(b);
      if (b + 1 < table.blocks()) table.prefetch(b + 1);
      const at::Tensor g_block = g.narrow(1, table.first_row(b), rows.size(0)).contiguous();
      if (input_grad) dx.add_(gemm_nt(mp, g_block, mp.matmul_input(rows).t(), at::kFloat));
      table.release(b);
      // A weight gradient is a sum over every token: fp32, as MixedLinear keeps it.
      table.block_gradient(b, mp.kept_gradient(gemm_nt(mp, g_block.t(), input.t(), at::kFloat)));
    }
    return {at::Tensor(), at::Tensor(), input_grad ? dx.view(ctx->saved_data["x_sizes"].toIntVector()) : at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor row_blocked_lookup(RowBlockedTable& table, const at::Tensor& weight, const at::Tensor& indices) {
  return RowBlockedLookup::apply(&table, weight, indices);
}

at::Tensor row_blocked_head(RowBlockedTable& table, const MixedPrecision& mp, const at::Tensor& weight, const at::Tensor& x) {
  return RowBlockedHead::apply(&table, mp, x, weight);
}

}  // namespace dtrain
