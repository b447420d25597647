// A lookup table the model reads in blocks of rows, each made whole on its own, with the gradient of
// each block handed back on its own: ZeRO stage 3's token embedding, so that no buffer of the
// table's size is gathered or held as a gradient (GPT-2's tied table is a third of the model). The
// model reads the table this way when one is set (TransformerImpl::set_row_blocked_table) and as one
// tensor otherwise; the parallelism that set it makes the blocks whole and reduces their gradients.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>

namespace dtrain {

class RowBlockedTable {
 public:
  virtual ~RowBlockedTable() = default;
  virtual int blocks() const = 0;
  // Block b holds rows [first_row(b), first_row(b + 1)); first_row(blocks()) is the table's rows.
  virtual int64_t first_row(int block) const = 0;
  // Starts making block b whole (nothing if it is).
  virtual void prefetch(int block) = 0;
  // Block b's rows [rows, dim] in fp32, whole until release(b).
  virtual at::Tensor acquire(int block) = 0;
  virtual void release(int block) = 0;
  // This rank's gradient of block b's rows [rows, dim] (fp32), complete for this backward but for
  // the lookup's rows below: the table takes it (and may reduce it at once).
  virtual void block_gradient(int block, at::Tensor grad) = 0;
  // The lookup's gradient: `grads` [n, dim] (fp32) to add to rows `rows` [n] (int64), repeats summed.
  virtual void row_gradients(const at::Tensor& rows, const at::Tensor& grads) = 0;
};

}  // namespace dtrain
