// Attention as exporters write it into the `attention` op, and back (passes.hpp).
//
// Recognition rewrites the two products around a softmax into one attention op whose operands
// are the head-splitting views of q, k and v undone: the op reads every head where it lies, so
// the reshape-transpose chains that split the heads, and the one that joins them after, cancel
// against the views this pass adds once simplify runs again (transpose∘transpose and
// reshape∘reshape collapse there). Correct whatever the chains are: a chain that does not
// cancel stays a copy, as before. Which layout the op takes comes from how q's heads were
// split: PyTorch's nn.MultiheadAttention export ([seq, batch, heads·size] reshaped to [seq,
// batch·heads, size] and transposed), the Hugging Face style ([batch, seq, heads·size] reshaped
// to [batch, seq, heads, size] and transposed), else [batch, heads, seq, size] as given.
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "ir/op_attrs.gen.hpp"
#include "passes/passes.hpp"
#include "passes/rewrite.hpp"

namespace esg::passes {
namespace {

using ir::Graph;
using ir::kNone;
using ir::NodeId;
using ir::Replay;
using ir::Shape;
using ir::ValueId;

using K = ir::OpKind;

ValueId reshaped(Replay& r, ValueId x, std::vector<int64_t> dims) {
  ir::AttrArg a = ir::AttrArg::of_ints(dims.data(), dims.size());
  const ValueId in[] = {x};
  return added(r, *ir::find_op(K::reshape), {in, 1}, {&a, 1});
}

ValueId transposed(Replay& r, ValueId x, std::vector<int64_t> perm) {
  ir::AttrArg a = ir::AttrArg::of_ints(perm.data(), perm.size());
  const ValueId in[] = {x};
  return added(r, *ir::find_op(K::transpose), {in, 1}, {&a, 1});
}

// x with its last two axes swapped.
ValueId swap_last(Replay& r, ValueId x) {
  const size_t rank = r.to().graph().shape(x).rank();
  std::vector<int64_t> perm(rank);
  for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(i);
  std::swap(perm[rank - 1], perm[rank - 2]);
  return transposed(r, x, perm);
}

// How the op's operands hold the heads, and how a logical operand of the products ([N, S, D],
// N = batch·heads, or [B, H, S, D]) maps to one.
struct Layout {
  enum Kind { SeqFirst, BatchFirst, Heads4 } kind = Heads4;
  int64_t batch = 0, heads = 1;
  bool logical_rank4 = false;  // the products' operands are [B, H, S, D] rather than [B·H, S, D]

  // The op's operand for a logical one of shape `s` ([.., S, D]); a symbolic S (the keys' and
  // values' of a decoder's growing cache) is the reshapes' one inferred axis.
  ValueId to_op(Replay& r, ValueId x, const Shape& s) const {
    const int64_t seq = ir::dim_is_symbolic(s[s.rank() - 2]) ? -1 : s[s.rank() - 2], size = s[s.rank() - 1];
    switch (kind) {
      case SeqFirst:  // [B·H, S, D] -> [S, B·H, D] -> [S, B, H·D]
        return reshaped(r, transposed(r, x, {1, 0, 2}), {seq, batch, heads * size});
      case BatchFirst:  // [B, H, S, D] -> [B, S, H, D] -> [B, S, H·D]
        if (!logical_rank4) x = reshaped(r, x, {batch, heads, seq, size});
        return reshaped(r, transposed(r, x, {0, 2, 1, 3}), {batch, seq, heads * size});
      case Heads4: return logical_rank4 ? x : reshaped(r, x, {batch, heads, seq, size});
    }
    return x;
  }
  // The logical result ([.., Sq, Dv]) from the op's `y`, the inverse of to_op.
  ValueId from_op(Replay& r, ValueId y, int64_t seq, int64_t size) const {
    switch (kind) {
      case SeqFirst: return transposed(r, reshaped(r, y, {seq, batch * heads, size}), {1, 0, 2});
      case BatchFirst: {
        const ValueId split = transposed(r, reshaped(r, y, {batch, seq, heads, size}), {0, 2, 1, 3});
        return logical_rank4 ? split : reshaped(r, split, {batch * heads, seq, size});
      }
      case Heads4: return logical_rank4 ? y : reshaped(r, y, {batch * heads, seq, size});
    }
    return y;
  }
};

// The layout q's head split suggests (t: the graph being built, q its logical operand).
Layout layout_of(const Graph& t, ValueId q) {
  const Shape s = t.shape(q);
  Layout l;
  l.logical_rank4 = s.rank() == 4;
  l.batch = s[0];
  l.heads = l.logical_rank4 ? s[1] : 1;
  // [.., heads, seq, size] from transpose(reshape(x [a, b, heads·size], [a, b, heads, size]), [0, 2, 1, 3])
  // (x [batch, seq, E]); as [batch·heads, seq, size] through one more reshape.
  const ir::Node* p = producer(t, q);
  if (p && !l.logical_rank4 && p->op->kind == K::reshape) p = producer(t, operand(t, *p, 0));
  if (p && p->op->kind == K::transpose && t.shape(operand(t, *p, 0)).rank() == 4 &&
      perm_of(t, *p, 4) == std::vector<int64_t>{0, 2, 1, 3}) {
    const ir::Node* split = made_by(t, operand(t, *p, 0), K::reshape);
    const Shape mid = t.shape(operand(t, *p, 0));
    const bool same_heads = l.logical_rank4 ? mid[0] == s[0] && mid[2] == s[1] : mid[0] * mid[2] == s[0];
    if (split && t.shape(operand(t, *split, 0)).rank() == 3 && same_heads) {
      l.kind = Layout::BatchFirst, l.batch = mid[0], l.heads = mid[2];
      return l;
    }
  }
  // [batch·heads, seq, size] from transpose(reshape(x [seq, batch, heads·size], [seq, batch·heads, size]), [1, 0, 2]).
  if (p && !l.logical_rank4 && p == producer(t, q) && p->op->kind == K::transpose && perm_of(t, *p, 3) == std::vector<int64_t>{1, 0, 2}) {
    const ir::Node* split = made_by(t, operand(t, *p, 0), K::reshape);
    const Shape x = split ? t.shape(operand(t, *split, 0)) : Shape{};
    if (split && x.rank() == 3 && x[2] % s[2] == 0 && x[1] * (x[2] / s[2]) == s[0]) {
      l.kind = Layout::SeqFirst, l.batch = x[1], l.heads = x[2] / s[2];
      return l;
    }
  }
  return l;
}

// Static and non-empty, but for axis `free` (if any), which may be symbolic.
bool static_nonempty(const Shape& s, size_t free = SIZE_MAX) {
  for (size_t d = 0; d < s.rank(); ++d)
    if (d != free && (ir::dim_is_symbolic(s[d]) || s[d] == 0)) return false;
  return true;
}

}  // namespace

std::unique_ptr<Graph> recognize_attention(const Graph& graph) {
  // Readers counted among live nodes only: the passes before leave the pieces they replaced.
  const std::unique_ptr<Graph> live = eliminate_dead_code(graph);
  const Graph& g = *live;
  const std::vector<uint32_t> uses = use_counts(g);
  return run_pass(g, [&](Replay& r, NodeId id) {
    const ir::Node& n = g.nodes[id];
    if (n.region != 0 || n.num_deps || n.op->kind != K::matmul || !ir::dtype_is_float(g.values[n.first_output].dtype)) return false;
    const ir::Node* softmax = made_by(g, operand(g, n, 0), K::softmax);
    const ir::Node* scores = softmax ? made_by(g, operand(g, *softmax, 0), K::matmul) : nullptr;
    if (!scores || uses[softmax->first_output] != 1 || uses[scores->first_output] != 1 || softmax->num_deps || scores->num_deps)
      return false;
    const ir::SoftmaxAttrs sm(g, *softmax);
    const ir::MatmulAttrs outer(g, n), inner(g, *scores);
    const size_t rank = g.shape(n.first_output).rank();
    if ((rank != 3 && rank != 4) || sm.axis != rank - 1 || sm.scale == 0 || outer.transpose_a) return false;
    const ValueId in[3] = {operand(g, *scores, 0), operand(g, *scores, 1), operand(g, n, 1)};
    const ValueId mask = softmax->num_inputs > 1 ? operand(g, *softmax, 1) : kNone;
    // q static; k and v too but for their sequence axis, which the op takes at run time.
    const size_t free[3] = {SIZE_MAX, inner.transpose_b ? rank - 2 : rank - 1, outer.transpose_b ? rank - 1 : rank - 2};
    for (size_t i = 0; i < 3; ++i)
      if (g.shape(in[i]).rank() != rank || !static_nonempty(g.shape(in[i]), free[i]) || g.values[in[i]].dtype != g.values[n.first_output].dtype)
        return false;
    if (!static_nonempty(g.shape(n.first_output)) || (mask != kNone && !g.shape(mask).is_static())) return false;
    for (size_t d = 0; d + 2 < rank; ++d)  // one batch, no broadcasting between the operands
      if (g.shape(in[0])[d] != g.shape(in[1])[d] || g.shape(in[0])[d] != g.shape(in[2])[d]) return false;
    // The products' operands as [.., S, D]: q and v as the op wants them, k untransposed.
    ValueId q = r.get(in[0]), k = r.get(in[1]), v = r.get(in[2]);
    if (inner.transpose_a) q = swap_last(r, q);
    if (!inner.transpose_b) k = swap_last(r, k);
    if (outer.transpose_b) v = swap_last(r, v);
    const Graph& t = r.to().graph();
    const Layout l = layout_of(t, q);
    const Shape qs = t.shape(q), vs = t.shape(v);
    ValueId m = mask == kNone ? kNone : r.get(mask);
    if (m != kNone && t.shape(m).rank() == 3 && !l.logical_rank4 && t.shape(m)[0] != 1) {
      const Shape ms = t.shape(m);  // one mask per batch·head: per batch and head
      m = reshaped(r, m, {l.batch, l.heads, ms[1], ms[2]});
    }
    ir::AttrArg attrs[3] = {ir::AttrArg::of_int(l.kind == Layout::Heads4 ? 1 : l.heads), ir::AttrArg::of_float(sm.scale),
                            ir::AttrArg::of_bool(l.kind == Layout::SeqFirst)};
    const ValueId operands[] = {l.to_op(r, q, qs), l.to_op(r, k, t.shape(k)), l.to_op(r, v, vs), m};
    const ValueId y = added(r, *ir::find_op(K::attention), {operands, 4}, {attrs, 3});
    r.set(n.first_output, l.from_op(r, y, qs[rank - 2], vs[rank - 1]));
    return true;
  });
}

std::unique_ptr<Graph> decompose_attention(const Graph& g) {
  return run_pass(g, [&](Replay& r, NodeId id) {
    const ir::Node& n = g.nodes[id];
    if (n.region != 0 || n.num_deps || n.op->kind != K::attention) return false;
    const ir::AttentionAttrs a(g, n);
    const bool rank4 = g.shape(n.first_output).rank() == 4;
    // [batch, heads, seq, size] takes its axes from [batch, seq, heads, size] (or [seq, batch, ..]).
    const std::vector<int64_t> to_bhsd = rank4 ? std::vector<int64_t>{0, 1, 2, 3}
                                        : a.seq_first ? std::vector<int64_t>{1, 2, 0, 3}
                                                      : std::vector<int64_t>{0, 2, 1, 3};
    auto heads_of = [&](uint32_t i) {
      const ValueId x = r.get(operand(g, n, i));
      return rank4 ? x : transposed(r, reshaped(r, x, {0, 0, a.num_heads, -1}), to_bhsd);
    };
    const Shape qs = g.shape(operand(g, n, 0));
    const int64_t head_size = rank4 ? qs[3] : qs[2] / a.num_heads;
    const double scale = a.scale != 0 ? a.scale : head_size > 0 ? 1 / std::sqrt(static_cast<double>(head_size)) : 1;
    ir::AttrArg flags[2] = {ir::AttrArg::of_bool(false), ir::AttrArg::of_bool(true)};  // q·kᵀ
    const ValueId qk[] = {heads_of(0), heads_of(1)};
    const ValueId scores = added(r, *ir::find_op(K::matmul), {qk, 2}, {flags, 2});
    const ValueId mask = n.num_inputs > 3 ? operand(g, n, 3) : kNone;
    ir::AttrArg sm[2] = {ir::AttrArg::of_int(-1), ir::AttrArg::of_float(scale)};
    const ValueId softmax_in[] = {scores, mask == kNone ? kNone : r.get(mask)};
    const ValueId pv[] = {added(r, *ir::find_op(K::softmax), {softmax_in, 2}, {sm, 2}), heads_of(2)};
    flags[1] = ir::AttrArg::of_bool(false);
    ValueId y = added(r, *ir::find_op(K::matmul), {pv, 2}, {flags, 2});
    if (!rank4) {
      std::vector<int64_t> back(4);
      for (int64_t i = 0; i < 4; ++i) back[static_cast<size_t>(to_bhsd[static_cast<size_t>(i)])] = i;
      y = reshaped(r, transposed(r, y, back), {0, 0, -1});
    }
    r.set(n.first_output, y);
    return true;
  });
}

}  // namespace esg::passes
