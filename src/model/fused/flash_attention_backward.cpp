#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <cmath>
#include <limits>
#include <vector>

#include "model/fused/flash_attention.h"
#include "model/fused/flash_blocks.h"
#include "model/fused/flash_softmax.h"

namespace dtrain {
namespace {

using flash::kBlock;

// One task per (batch, kv head): it owns dk and dv of that kv head and dq of the query heads that read
// it, so nothing is shared between threads and nothing is recomputed.
template <typename T>
FlashGradients backward(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                        const at::Tensor& lse, bool causal) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), hd = q.size(3), KV = k.size(1), Tk = k.size(2);
  const int64_t group = H / KV, key_blocks = (Tk + kBlock - 1) / kBlock, query_blocks = (Tq + kBlock - 1) / kBlock;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  const int64_t block_pad = flash::round_up_even(kBlock);
  const at::Tensor lse_rows = lse.contiguous();

  at::Tensor dq = at::empty({B, Tq, H, hd}, q.options()).transpose(1, 2);
  at::Tensor dk = at::empty({B, Tk, KV, hd}, k.options()).transpose(1, 2);
  at::Tensor dv = at::empty({B, Tk, KV, hd}, v.options()).transpose(1, 2);
  const flash::HeadsView<T> qs(q), ks(k), vs(v), gs(dout), os(out), dqs(dq), dks(dk), dvs(dv);
  const float* const lse_base = lse_rows.data_ptr<float>();
  at::parallel_for(0, B * KV, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> kt_packed(key_blocks * hd * kBlock), vt_packed(key_blocks * hd * kBlock), k_packed(key_blocks * block_pad * hd);
    std::vector<T> q_packed(block_pad * hd), dout_packed(block_pad * hd), probs_t(kBlock * block_pad), grads(kBlock * block_pad),
        grads_t(kBlock * block_pad);
    std::vector<float> dk_acc(Tk * hd), dv_acc(Tk * hd), dq_acc(kBlock * hd), probs(kBlock * kBlock), dprobs(kBlock * kBlock),
        dscores(kBlock * kBlock), d(kBlock);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / KV, g = t % KV;
      for (int64_t j = 0; j < key_blocks; ++j) {
        const int64_t keys = std::min(kBlock, Tk - j * kBlock);
        flash::pack_columns(ks.rows(b, g, j * kBlock), keys, hd, ks.row, kt_packed.data() + j * hd * kBlock);
        flash::pack_columns(vs.rows(b, g, j * kBlock), keys, hd, vs.row, vt_packed.data() + j * hd * kBlock);
        flash::pack_rows(ks.rows(b, g, j * kBlock), keys, hd, ks.row, k_packed.data() + j * block_pad * hd);
      }
      std::fill(dk_acc.begin(), dk_acc.end(), 0.f);
      std::fill(dv_acc.begin(), dv_acc.end(), 0.f);
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        for (int64_t i = 0; i < query_blocks; ++i) {
          const int64_t row0 = i * kBlock, rows = std::min(kBlock, Tq - row0), rows_even = flash::round_up_even(rows);
          const T* qi = qs.rows(b, h, row0);
          const T* doi = gs.rows(b, h, row0);
          const T* oi = os.rows(b, h, row0);
          const float* li = lse_base + (b * H + h) * Tq + row0;
          flash::pack_rows(qi, rows, hd, qs.row, q_packed.data());
          flash::pack_rows(doi, rows, hd, gs.row, dout_packed.data());
          for (int64_t r = 0; r < rows; ++r) d[r] = flash::dot(doi + r * gs.row, oi + r * os.row, hd);
          std::fill(dq_acc.begin(), dq_acc.end(), 0.f);
          const int64_t blocks = flash::key_blocks_for(causal, row0, rows, Tk);
          for (int64_t j = 0; j < blocks; ++j) {
            const int64_t key0 = j * kBlock, keys = std::min(kBlock, Tk - key0), keys_even = flash::round_up_even(keys);
            flash::block_gemm(rows, keys, hd, qi, qs.row, kt_packed.data() + j * hd * kBlock, probs.data(), kBlock, false);
            flash::block_gemm(rows, keys, hd, doi, gs.row, vt_packed.data() + j * hd * kBlock, dprobs.data(), kBlock, false);
            for (int64_t r = 0; r < rows; ++r) {
              float* p = probs.data() + r * kBlock;
              const int64_t visible = flash::visible_keys(causal, row0 + r, key0, keys);
              std::fill(p + visible, p + keys, -std::numeric_limits<float>::infinity());
              flash::exp_and_sum(p, keys, scale, li[r]);
              // The scale of S = scale·q·kᵀ folded into dS before it is rounded: dq = dS·k, dk = dSᵀ·q.
              flash::softmax_gradient(dscores.data() + r * kBlock, p, dprobs.data() + r * kBlock, keys, d[r], scale);
            }
            flash::round_transposed(probs.data(), rows, keys, kBlock, probs_t.data(), rows_even);
            flash::round_transposed(dscores.data(), rows, keys, kBlock, grads_t.data(), rows_even);
            flash::round_rows(dscores.data(), rows, keys, kBlock, grads.data(), keys_even);
            flash::block_gemm(keys, hd, rows_even, probs_t.data(), rows_even, dout_packed.data(), dv_acc.data() + key0 * hd, hd, true);
            flash::block_gemm(keys, hd, rows_even, grads_t.data(), rows_even, q_packed.data(), dk_acc.data() + key0 * hd, hd, true);
            flash::block_gemm(rows, hd, keys_even, grads.data(), keys_even, k_packed.data() + j * block_pad * hd, dq_acc.data(), hd, true);
          }
          for (int64_t r = 0; r < rows; ++r) flash::round_row(dq_acc.data() + r * hd, hd, dqs.rows(b, h, row0 + r));
        }
      }
      for (int64_t r = 0; r < Tk; ++r) {
        flash::round_row(dk_acc.data() + r * hd, hd, dks.rows(b, g, r));
        flash::round_row(dv_acc.data() + r * hd, hd, dvs.rows(b, g, r));
      }
    }
    at::native::cpublas::brgemm_release();
  });
  return {dq, dk, dv};
}

}  // namespace

FlashGradients flash_attention_backward(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const at::Tensor& out, const at::Tensor& lse, bool causal) {
  RECORD_FUNCTION("dtrain::flash_attention_backward", std::vector<c10::IValue>{});
  TORCH_CHECK(flash_attention_serves(q, k, v), "flash_attention_backward: no kernel for q ", q.sizes(), " ", q.dtype(), " on ", q.device());
  TORCH_CHECK(dout.sizes() == q.sizes() && out.sizes() == q.sizes() && dout.scalar_type() == q.scalar_type() &&
                  out.scalar_type() == q.scalar_type() && lse.scalar_type() == at::kFloat,
              "flash_attention_backward: dout and out must be shaped and typed like q, lse fp32");
  auto rows_contiguous = [](const at::Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); };
  const at::Tensor g = rows_contiguous(dout), o = rows_contiguous(out);
  if (q.scalar_type() == at::kBFloat16) return backward<at::BFloat16>(g, q, k, v, o, lse, causal);
  return backward<at::Half>(g, q, k, v, o, lse, causal);
}

}  // namespace dtrain
