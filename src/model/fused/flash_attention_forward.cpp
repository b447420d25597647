#include <ATen/Parallel.h>
#include <ATen/native/CPUBlas.h>
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

template <typename T>
FlashOutput forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), hd = q.size(3), KV = k.size(1), Tk = k.size(2);
  const int64_t group = H / KV, key_blocks = (Tk + kBlock - 1) / kBlock, query_blocks = (Tq + kBlock - 1) / kBlock;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  const int64_t block_pad = flash::round_up_even(kBlock);

  // kᵀ and v of every key block in VNNI layout, packed once and read by every query block.
  at::Tensor kt_packed = at::empty({B, KV, key_blocks, hd * kBlock}, q.options());
  at::Tensor v_packed = at::empty({B, KV, key_blocks, block_pad * hd}, q.options());
  T* const kt_base = kt_packed.data_ptr<T>();
  T* const v_base = v_packed.data_ptr<T>();
  const flash::HeadsView<T> qs(q), ks(k), vs(v);
  at::parallel_for(0, B * KV * key_blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / (KV * key_blocks), g = t / key_blocks % KV, j = t % key_blocks;
      const int64_t keys = std::min(kBlock, Tk - j * kBlock);
      flash::pack_columns(ks.rows(b, g, j * kBlock), keys, hd, ks.row, kt_base + t * hd * kBlock);
      flash::pack_rows(vs.rows(b, g, j * kBlock), keys, hd, vs.row, v_base + t * block_pad * hd);
    }
  });

  at::Tensor out = at::empty({B, Tq, H, hd}, q.options()).transpose(1, 2);
  at::Tensor lse = at::empty({B, H, Tq}, q.options().dtype(at::kFloat));
  const flash::HeadsView<T> os(out);
  float* const lse_base = lse.data_ptr<float>();
  at::parallel_for(0, B * H * query_blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(kBlock * kBlock), acc(kBlock * hd), row_max(kBlock), row_sum(kBlock);
    std::vector<T> probs(kBlock * block_pad);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / (H * query_blocks), h = t / query_blocks % H, i = t % query_blocks;
      const int64_t row0 = i * kBlock, rows = std::min(kBlock, Tq - row0), g = h / group;
      const T* qi = qs.rows(b, h, row0);
      std::fill(row_max.begin(), row_max.end(), -std::numeric_limits<float>::infinity());
      std::fill(row_sum.begin(), row_sum.end(), 0.f);
      std::fill(acc.begin(), acc.end(), 0.f);
      const int64_t blocks = flash::key_blocks_for(causal, row0, rows, Tk);
      for (int64_t j = 0; j < blocks; ++j) {
        const int64_t key0 = j * kBlock, keys = std::min(kBlock, Tk - key0), packed = (b * KV + g) * key_blocks + j;
        flash::block_gemm(rows, keys, hd, qi, qs.row, kt_base + packed * hd * kBlock, scores.data(), kBlock, false);
        for (int64_t r = 0; r < rows; ++r) {
          float* s = scores.data() + r * kBlock;
          const int64_t visible = flash::visible_keys(causal, row0 + r, key0, keys);
          std::fill(s + visible, s + keys, -std::numeric_limits<float>::infinity());
          const float m = std::max(row_max[r], flash::row_max(s, keys) * scale);
          // Block 0 holds a key every row sees, so m is finite from the first block on.
          const float rescale = std::exp(row_max[r] - m);
          row_sum[r] = row_sum[r] * rescale + flash::exp_and_sum(s, keys, scale, m);
          row_max[r] = m;
          float* a = acc.data() + r * hd;
          for (int64_t c = 0; c < hd; ++c) a[c] *= rescale;
        }
        const int64_t keys_even = flash::round_up_even(keys);
        flash::round_rows(scores.data(), rows, keys, kBlock, probs.data(), keys_even);
        flash::block_gemm(rows, hd, keys_even, probs.data(), keys_even, v_base + packed * block_pad * hd, acc.data(), hd, true);
      }
      T* o = os.rows(b, h, row0);
      float* l = lse_base + (b * H + h) * Tq + row0;
      for (int64_t r = 0; r < rows; ++r) {
        const float inv = 1.f / row_sum[r];
        float* a = acc.data() + r * hd;
        for (int64_t c = 0; c < hd; ++c) a[c] *= inv;
        flash::round_row(a, hd, o + r * os.row);
        l[r] = row_max[r] + std::log(row_sum[r]);
      }
    }
    at::native::cpublas::brgemm_release();
  });
  return {out, lse};
}

}  // namespace

FlashOutput flash_attention_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, FlashForward kernel) {
  RECORD_FUNCTION("dtrain::flash_attention_forward", std::vector<c10::IValue>{});
  TORCH_CHECK(flash_attention_serves(q, k, v), "flash_attention_forward: no kernel for q ", q.sizes(), " ", q.dtype(), " on ", q.device());
  const bool same_heads = q.size(1) == k.size(1);
  TORCH_CHECK(kernel != FlashForward::ATen || same_heads, "flash_attention_forward: ATen's kernel takes as many key/value heads as query heads, got ",
              k.size(1), " for ", q.size(1));
  if (kernel == FlashForward::ATen || (kernel == FlashForward::Fastest && same_heads && at::native::cpublas::could_pack(q.scalar_type()))) {
    auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal);
    return {out, lse};
  }
  if (q.scalar_type() == at::kBFloat16) return forward<at::BFloat16>(q, k, v, causal);
  return forward<at::Half>(q, k, v, causal);
}

}  // namespace dtrain
