// Where the heads of the `attention` op lie in its operands (op_defs/nn.yaml): element (batch b,
// head h, position s, lane d) of q, k, v or y is at b·batch + h·head + s·seq + d. The reference
// kernel and the CPU's fast one both walk the operands through this, so the three layouts
// (rank 4, rank 3 batch first, rank 3 sequence first) are read in place, never transposed.
#pragma once
#include <cmath>
#include <cstdint>

#include "ir/op_attrs.gen.hpp"
#include "ir/shape.hpp"

namespace esg::eval {

struct HeadStrides {
  int64_t batch = 0, head = 0, seq = 0;
};

struct AttentionLayout {
  int64_t batch = 0, heads = 0, q_seq = 0, kv_seq = 0, head_size = 0, v_head_size = 0;
  double scale = 1;  // the attribute's 0 resolved to 1/√head_size
  HeadStrides q, k, v, y;
  // The mask broadcast to [batch, heads, q_seq, kv_seq]: 0 along an axis it broadcasts over.
  int64_t mask_strides[4] = {};

  // Shapes as the infer rule checked them; `mask` null without one.
  AttentionLayout(const ir::AttentionAttrs& a, const ir::Shape& qs, const ir::Shape& ks, const ir::Shape& vs, const ir::Shape* mask) {
    const bool rank4 = qs.rank() == 4;
    const size_t b = !rank4 && a.seq_first ? 1 : 0, s = rank4 ? 2 : 1 - b, w = qs.rank() - 1;
    batch = qs[b];
    heads = rank4 ? qs[1] : a.num_heads;
    q_seq = qs[s];
    kv_seq = ks[s];
    head_size = rank4 ? qs[3] : qs[w] / heads;
    v_head_size = rank4 ? vs[3] : vs[w] / heads;
    scale = a.scale != 0 ? a.scale : head_size ? 1 / std::sqrt(static_cast<double>(head_size)) : 1;
    auto strides = [&](int64_t seq_len, int64_t size) {
      if (rank4) return HeadStrides{heads * seq_len * size, seq_len * size, size};
      const int64_t row = heads * size;  // the width of a position: every head side by side
      return a.seq_first ? HeadStrides{row, size, batch * row} : HeadStrides{seq_len * row, size, row};
    };
    q = strides(q_seq, head_size);
    k = strides(kv_seq, head_size);
    v = strides(kv_seq, v_head_size);
    y = strides(q_seq, v_head_size);
    if (!mask) return;
    int64_t stride = 1;
    for (size_t d = mask->rank(); d-- > 0;) {
      mask_strides[4 - mask->rank() + d] = (*mask)[d] == 1 ? 0 : stride;
      stride *= (*mask)[d];
    }
  }

  static int64_t at(const HeadStrides& st, int64_t b, int64_t h, int64_t s) { return b * st.batch + h * st.head + s * st.seq; }
  int64_t mask_at(int64_t b, int64_t h, int64_t i) const { return b * mask_strides[0] + h * mask_strides[1] + i * mask_strides[2]; }
};

}  // namespace esg::eval
