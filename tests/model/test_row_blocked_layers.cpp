#include <gtest/gtest.h>
#include <torch/types.h>

#include <map>
#include <string>
#include <vector>

#include "model/loss.h"
#include "model/row_blocked_table.h"
#include "model/transformer.h"

using namespace dtrain;

namespace {

// The model's own table read in blocks of `rows` rows, each acquired as a copy (as a gather makes
// one), with the blocks' and the lookup's gradients summed into a table-sized gradient, as the
// shard's reduction sums them. Records which blocks are whole, to check each is released.
class TableInBlocks : public RowBlockedTable {
 public:
  TableInBlocks(at::Tensor table, int64_t rows) : table_(std::move(table)), rows_(rows), grad_(at::zeros_like(table_)) {}
  int blocks() const override { return int((table_.size(0) + rows_ - 1) / rows_); }
  int64_t first_row(int block) const override { return std::min<int64_t>(block * rows_, table_.size(0)); }
  void prefetch(int) override {}
  at::Tensor acquire(int block) override {
    ++whole_;
    return table_.detach().narrow(0, first_row(block), first_row(block + 1) - first_row(block)).clone();
  }
  void release(int) override { --whole_; }
  void block_gradient(int block, at::Tensor grad) override { grad_.narrow(0, first_row(block), grad.size(0)).add_(grad); }
  void row_gradients(const at::Tensor& rows, const at::Tensor& grads) override { grad_.index_add_(0, rows, grads); }

  at::Tensor& grad() { return grad_; }
  int whole() const { return whole_; }

 private:
  at::Tensor table_;
  int64_t rows_;
  at::Tensor grad_;
  int whole_ = 0;
};

// Per element: |got - expected| <= atol + rtol·|expected|.
void expect_close(const at::Tensor& got, const at::Tensor& expected, double atol, double rtol, const std::string& what) {
  ASSERT_EQ(got.sizes(), expected.sizes()) << what;
  const at::Tensor excess = (got.to(at::kDouble) - expected.to(at::kDouble)).abs() - (atol + rtol * expected.to(at::kDouble).abs());
  EXPECT_LE(excess.max().item<double>(), 0.0) << what << ": off by up to " << (got - expected).abs().max().item<double>();
}

struct TrainedRun {
  std::vector<double> losses;
  std::map<std::string, at::Tensor> parameters;
};

// Three SGD steps of the tiny tied GPT-2 on fixed tokens; with `rows`, the table read in blocks of
// that many rows. The blocks change only the order of sums: the head's input gradient sums the
// blocks' products, and the lookup's rows are added to the head's table gradient after it.
TrainedRun train(int64_t rows, const MixedPrecision& mp = {}) {
  TransformerConfig c = model_preset("tiny");
  c.arch = "gpt2";
  Transformer model(c, 7);
  model->set_precision(mp);
  auto named = model->named_parameters();
  std::unique_ptr<TableInBlocks> table;
  at::Tensor wte = named["wte.weight"];
  const at::Tensor tokens = at::randint(c.vocab_size, {2, c.seq_len + 1}, at::TensorOptions().dtype(at::kLong).device(at::kCPU));
  TrainedRun run;
  for (int step = 0; step < 3; ++step) {
    if (rows > 0) {
      table = std::make_unique<TableInBlocks>(wte, rows);
      model->set_row_blocked_table(table.get());
    }
    model->zero_grad();
    const at::Tensor loss = next_token_loss(model->forward(tokens.narrow(1, 0, c.seq_len)), tokens.narrow(1, 1, c.seq_len));
    loss.backward();
    run.losses.push_back(loss.item<double>());
    EXPECT_TRUE(!table || table->whole() == 0) << "a block left whole";
    torch::NoGradGuard no_grad;
    for (auto& item : named) {
      const at::Tensor g = table && item.key() == "wte.weight" ? table->grad() : item.value().grad();
      TORCH_CHECK(g.defined(), item.key(), " got no gradient");
      item.value().sub_(g, 0.5);
    }
    model->refresh_working_copy();
  }
  for (const auto& item : named) run.parameters[item.key()] = item.value().detach().clone();
  return run;
}

void expect_trains_alike(const TrainedRun& blocked, const TrainedRun& whole, double atol, double rtol, const std::string& what) {
  for (size_t i = 0; i < whole.losses.size(); ++i)
    EXPECT_NEAR(blocked.losses[i], whole.losses[i], atol + rtol * std::abs(whole.losses[i])) << what << " step " << i + 1;
  for (const auto& [name, p] : whole.parameters) expect_close(blocked.parameters.at(name), p, atol, rtol, what + " " + name);
}

}  // namespace

// The tiny model's 256-row table in blocks of 100 rows (the last one short) and of 3: fp32
// sums in another order, so within 1e-6 + 1e-5·|x|, losses and every parameter after three steps.
TEST(RowBlockedLayers, TiedHeadAndLookupInRowBlocksTrainLikeTheWholeTable) {
  at::manual_seed(3);
  const TrainedRun whole = train(0);
  for (int64_t rows : {100, 3}) {
    at::manual_seed(3);
    expect_trains_alike(train(rows), whole, 1e-6, 1e-5, "blocks of " + std::to_string(rows) + " rows");
  }
}

// Under bf16 the blocks round what the whole table's GEMM rounds (the same operands and products);
// the head's input gradient sums the blocks in fp32 where the whole GEMM rounded once to bf16, so
// the bound is bf16's: 2^-8 relative.
TEST(RowBlockedLayers, TiedHeadInRowBlocksUnderBf16TrainsLikeTheWholeTable) {
  const MixedPrecision bf16 = MixedPrecision::make(at::kBFloat16, at::kCPU);
  at::manual_seed(3);
  const TrainedRun whole = train(0, bf16);
  at::manual_seed(3);
  expect_trains_alike(train(100, bf16), whole, 1e-3, 1.0 / 128, "bf16, blocks of 100 rows");
}
