#include "parallel/context/ring_attention.h"

#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/collectives.h"
#include "parallel/context/attention_block.h"

namespace dtrain {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Local queries [q_begin, q_begin + q_len) against the first kv_len tokens of the k/v a rank holds.
struct RingBlock {
  int64_t q_begin = 0, q_len = 0, kv_len = 0;
  bool causal = false;
};

// What rank `holder` computes while it holds the k/v of rank `source`: the one place that decides which
// (query chunk, key chunk) pairs a mask hides, for forward, backward and the work count alike.
// Chunks are held in ascending order, so a causal query chunk sees a prefix of another rank's chunks
// (those before it), and its own tokens under the causal mask of local order, which is global order.
// Query chunks that see the same prefix run as one block.
std::vector<RingBlock> ring_blocks(const SequenceLayout& layout, int holder, int source, bool causal) {
  const int64_t len = layout.chunk_len();
  if (causal && holder == source) return {{0, layout.local_len(), layout.local_len(), true}};
  const std::vector<int> queries = layout.chunks_of(holder), keys = layout.chunks_of(source);
  std::vector<RingBlock> blocks;
  for (size_t i = 0; i < queries.size(); ++i) {
    const int64_t seen = causal ? std::count_if(keys.begin(), keys.end(), [&](int c) { return c < queries[i]; }) : int64_t(keys.size());
    if (seen == 0) continue;
    const int64_t begin = int64_t(i) * len;
    if (!blocks.empty() && blocks.back().q_begin + blocks.back().q_len == begin && blocks.back().kv_len == seen * len)
      blocks.back().q_len += len;
    else
      blocks.push_back({begin, len, seen * len, false});
  }
  return blocks;
}

// One hop of the ring: `sent` to the next rank while the previous rank's arrives. Holds `sent`
// until the send completes.
struct RingHop {
  at::Tensor sent, arriving;
  CommHandle send, recv;

  at::Tensor wait() {
    recv.wait();
    send.wait();
    return arriving;
  }
};

RingHop pass_on(Group& g, const at::Tensor& t, const std::string& label) {
  const int n = g.size(), r = g.rank();
  RingHop hop{t, at::empty_like(t), {}, {}};
  hop.send = send_async(g, t, (r + 1) % n, label);
  hop.recv = recv_async(g, hop.arriving, (r + n - 1) % n, label);
  return hop;
}

struct RingSetup : torch::CustomClassHolder {
  std::shared_ptr<Group> group;
  SequenceLayout layout;
  bool causal = false;

  int source_at(int step) const { return (layout.rank - step + layout.cp) % layout.cp; }
  // [2,B,KV,T,hd]: k and v travel as one message.
  static at::Tensor pack(const at::Tensor& k, const at::Tensor& v) { return at::stack({k, v}); }
};

// The log-sum-exp rule: out and lse (fp32 views of the running result's rows) become those of the
// softmax over the keys seen so far and the block's.
void merge_into(at::Tensor out, at::Tensor lse, const BlockAttention& block) {
  const at::Tensor merged_lse = at::logaddexp(lse, block.lse);
  out.mul_(at::exp(lse - merged_lse).unsqueeze(-1)).add_(block.out.to(at::kFloat) * at::exp(block.lse - merged_lse).unsqueeze(-1));
  lse.copy_(merged_lse);
}

struct RingAttention : torch::autograd::Function<RingAttention> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            c10::intrusive_ptr<RingSetup> setup) {
    const SequenceLayout& layout = setup->layout;
    const auto f32 = q.options().dtype(at::kFloat);
    at::Tensor out = at::zeros(q.sizes(), f32);
    at::Tensor lse = at::full({q.size(0), q.size(1), q.size(2)}, -std::numeric_limits<float>::infinity(), f32);
    at::Tensor held = RingSetup::pack(k, v);
    for (int step = 0; step < layout.cp; ++step) {
      RingHop next;
      const bool more = step + 1 < layout.cp;
      if (more) next = pass_on(*setup->group, held, "ring attention k/v step " + std::to_string(step));
      for (const RingBlock& b : ring_blocks(layout, layout.rank, setup->source_at(step), setup->causal))
        merge_into(out.narrow(2, b.q_begin, b.q_len), lse.narrow(2, b.q_begin, b.q_len),
                   block_attention_forward(q.narrow(2, b.q_begin, b.q_len), held[0].narrow(2, 0, b.kv_len),
                                           held[1].narrow(2, 0, b.kv_len), b.causal));
      if (more) held = next.wait();
    }
    out = out.to(q.scalar_type());
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["setup"] = c10::IValue::make_capsule(std::move(setup));
    return out;
  }

  // Every block's gradient uses the global out and lse, so the blocks' gradients add up to the full
  // softmax's. The dk/dv of a chunk are summed on each rank it visits (fp32) and passed on behind it,
  // one hop after the chunk itself: after cp hops they are back with their owner.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto setup = c10::static_intrusive_pointer_cast<RingSetup>(ctx->saved_data["setup"].toCapsule());
    const SequenceLayout& layout = setup->layout;
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    const at::Tensor dout = grads[0].contiguous();
    at::Tensor dq = at::zeros(q.sizes(), q.options().dtype(at::kFloat));
    at::Tensor held = RingSetup::pack(k, v), dkv;
    RingHop held_grads;  // the dk/dv accumulator of the chunk held next, arriving from the previous rank
    for (int step = 0; step < layout.cp; ++step) {
      RingHop next;
      const bool more = step + 1 < layout.cp;
      if (more) next = pass_on(*setup->group, held, "ring attention backward k/v step " + std::to_string(step));
      dkv = at::zeros(held.sizes(), held.options().dtype(at::kFloat));
      for (const RingBlock& b : ring_blocks(layout, layout.rank, setup->source_at(step), setup->causal)) {
        const BlockGradients g = block_attention_backward(
            dout.narrow(2, b.q_begin, b.q_len), q.narrow(2, b.q_begin, b.q_len), held[0].narrow(2, 0, b.kv_len),
            held[1].narrow(2, 0, b.kv_len), out.narrow(2, b.q_begin, b.q_len), lse.narrow(2, b.q_begin, b.q_len), b.causal);
        dq.narrow(2, b.q_begin, b.q_len).add_(g.dq);
        dkv[0].narrow(2, 0, b.kv_len).add_(g.dk);
        dkv[1].narrow(2, 0, b.kv_len).add_(g.dv);
      }
      if (step > 0) dkv.add_(held_grads.wait());
      if (layout.cp > 1) held_grads = pass_on(*setup->group, dkv, "ring attention dk/dv step " + std::to_string(step));
      if (more) held = next.wait();
    }
    if (layout.cp > 1) dkv = held_grads.wait();
    return {dq.to(q.scalar_type()), dkv[0].to(k.scalar_type()), dkv[1].to(v.scalar_type()), at::Tensor()};
  }
};

void check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Group& group, const SequenceLayout& layout) {
  if (group.size() != layout.cp || group.rank() != layout.rank)
    throw std::invalid_argument("ring attention on group " + group.name() + " (rank " + std::to_string(group.rank()) + " of " +
                                std::to_string(group.size()) + ") with a layout for cp rank " + std::to_string(layout.rank) +
                                " of parallel.cp " + std::to_string(layout.cp));
  for (const at::Tensor* t : {&q, &k, &v})
    if (t->dim() != 4 || t->size(2) != layout.local_len())
      throw std::invalid_argument("ring attention needs [B, heads, " + std::to_string(layout.local_len()) +
                                  " local tokens, head_dim] tensors, got q " + c10::str(q.sizes()) + ", k " +
                                  c10::str(k.sizes()) + ", v " + c10::str(v.sizes()));
}

}  // namespace

at::Tensor ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::shared_ptr<Group>& group,
                          const SequenceLayout& layout, bool causal) {
  check_inputs(q, k, v, *group, layout);
  auto setup = c10::make_intrusive<RingSetup>();
  setup->group = group;
  setup->layout = layout;
  setup->causal = causal;
  return RingAttention::apply(q.contiguous(), k.contiguous(), v.contiguous(), std::move(setup));
}

double causal_score_blocks(const SequenceLayout& layout, int r) {
  const double len = double(layout.chunk_len());
  double blocks = 0;
  for (int source = 0; source < layout.cp; ++source)
    for (const RingBlock& b : ring_blocks(layout, r, source, true))
      blocks += double(b.q_len) / len * (double(b.kv_len) / len) * (b.causal ? 0.5 : 1.0);
  return blocks;
}

}  // namespace dtrain
