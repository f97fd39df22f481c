// attention (op_defs/nn.yaml) in f32. Per (batch, head) and block of query positions: the
// scores q·kᵀ by one sgemm into a scratch block small enough for L2, the scaled, masked softmax
// of each row (softmax_row.hpp), and the block's result by a second sgemm written straight into
// y. q, k, v and y are read and written where their layout puts each head
// (eval/attention_layout.hpp), so no transpose or slice copies a head out or back, and the
// scores never exist whole: [batch, heads, q_seq, kv_seq] floats that the exported
// MatMul-Softmax-MatMul writes and reads twice.
#include <algorithm>
#include <vector>

#include "cpu/fast_kernels.hpp"
#include "cpu/gemm.hpp"
#include "cpu/softmax_row.hpp"
#include "cpu/split.hpp"
#include "eval/attention_layout.hpp"

namespace esg::cpu {
namespace {

// Scores kept per block, two copies (logits and probabilities): 2 × 64 KiB, within L2.
constexpr int64_t kBlockScores = 16 * 1024;

void attention_f32(const eval::KernelCall& c) {
  const eval::TensorRef* mask = c.in.size() > 3 ? c.in[3] : nullptr;
  const eval::AttentionLayout l(c.attrs<ir::AttentionAttrs>(), c.in[0]->shape, c.in[1]->shape, c.in[2]->shape,
                                mask ? &mask->shape : nullptr);
  const float *q = c.in[0]->data<float>(), *k = c.in[1]->data<float>(), *v = c.in[2]->data<float>();
  const float* m = mask ? mask->data<float>() : nullptr;
  float* y = c.out[0]->data<float>();
  if (c.out[0]->size() == 0) return;
  const int64_t rows = std::clamp<int64_t>(kBlockScores / std::max<int64_t>(l.kv_seq, 1), 1, l.q_seq);
  const int64_t blocks_per_head = (l.q_seq + rows - 1) / rows, blocks = l.batch * l.heads * blocks_per_head;
  const auto scale = static_cast<float>(l.scale);
  auto run_blocks = [&](int64_t first, int64_t last) {
    // Grown once per thread, then reused by every later run.
    thread_local std::vector<float> scratch;
    scratch.resize(std::max(scratch.size(), static_cast<size_t>(2 * rows * l.kv_seq)));
    float *logits = scratch.data(), *probs = scratch.data() + rows * l.kv_seq;
    for (int64_t block = first; block < last; ++block) {
      const int64_t bh = block / blocks_per_head, b = bh / l.heads, h = bh % l.heads;
      const int64_t i0 = block % blocks_per_head * rows, n = std::min(rows, l.q_seq - i0);
      sgemm(false, true, n, l.kv_seq, l.head_size, q + l.at(l.q, b, h, i0), l.q.seq, k + l.at(l.k, b, h, 0), l.k.seq, logits,
            l.kv_seq, nullptr);
      for (int64_t i = 0; i < n; ++i)
        softmax_row(logits + i * l.kv_seq, scale, m ? m + l.mask_at(b, h, i0 + i) : nullptr, l.mask_strides[3],
                    probs + i * l.kv_seq, l.kv_seq);
      sgemm(false, false, n, l.v_head_size, l.kv_seq, probs, l.kv_seq, v + l.at(l.v, b, h, 0), l.v.seq, y + l.at(l.y, b, h, i0),
            l.y.seq, nullptr);
    }
  };
  const double macs = static_cast<double>(l.batch * l.heads * l.q_seq) * static_cast<double>(l.kv_seq) *
                      static_cast<double>(l.head_size + l.v_head_size);
  const int64_t pieces = std::min<int64_t>(blocks, pieces_for_macs(macs, c.parallel ? c.parallel->free_threads() : 1));
  if (pieces == 1) return run_blocks(0, blocks);
  c.parallel->run(pieces, [&](int64_t p) { run_blocks(blocks * p / pieces, blocks * (p + 1) / pieces); });
}

}  // namespace

eval::Kernel attention_kernel(const ir::Graph& g, const ir::Node& n) {
  if (n.op->kind != ir::OpKind::attention) return nullptr;
  for (uint32_t i = 0; i < n.num_inputs; ++i)
    if (g.operands[n.first_input + i] != ir::kNone && g.values[g.operands[n.first_input + i]].dtype != ir::DType::F32) return nullptr;
  return attention_f32;
}

}  // namespace esg::cpu
