#include "passes/passes.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cmath>
#include <optional>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "eval/evaluate.hpp"
#include "ir/op_attrs.gen.hpp"
#include "ir/replay.hpp"
#include "ir/verify.hpp"
#include "passes/rewrite.hpp"

namespace esg::passes {
namespace {

using ir::Graph;
using ir::kNone;
using ir::NodeId;
using ir::Replay;
using ir::ValueId;

using K = ir::OpKind;

// Whether an elementwise node is one of the four arithmetic ops.
bool is_arithmetic(K k) { return k == K::add || k == K::sub || k == K::mul || k == K::div; }

// Whether a constant of the new graph holds `value` in every element.
bool constant_all(const Graph& g, ValueId v, double value) {
  const ir::Node* p = producer(g, v);
  if (!p || p->blob == kNone) return false;
  eval::TensorRef t{g.values[v].dtype, g.shape(v), const_cast<uint8_t*>(g.blobs[p->blob]->data())};
  for (int64_t i = 0; i < t.size(); ++i)
    if (eval::load_f(t, i) != value) return false;
  return true;
}

// A binary op whose second (or first, when it commutes) operand is a neutral constant: the
// other operand, if the result has its shape and dtype.
ValueId neutral_operand(Replay& r, const ir::Node& n) {
  const Graph& g = r.to().graph();
  const ValueId a = r.get(r.from().operands[n.first_input]), b = r.get(r.from().operands[n.first_input + 1]);
  const ValueId out_old = n.first_output;
  auto same_as_out = [&](ValueId v) {
    return g.values[v].dtype == r.from().values[out_old].dtype && g.shape(v) == r.from().shape(out_old);
  };
  const K k = n.op->kind;
  const bool add = k == K::add, sub = k == K::sub, mul = k == K::mul;
  const double neutral = add || sub ? 0.0 : 1.0;
  if (is_arithmetic(k) && constant_all(g, b, neutral) && same_as_out(a)) return a;
  if ((add || mul) && constant_all(g, a, neutral) && same_as_out(b)) return b;
  return kNone;
}

// Widening conversions that lose nothing, so cast(cast(x, A), B) == cast(x, B).
bool lossless(ir::DType from, ir::DType to) {
  using ir::DType;
  if (from == to || from == DType::Bool) return true;
  const int fs = static_cast<int>(ir::dtype_size(from)), ts = static_cast<int>(ir::dtype_size(to));
  if (ir::dtype_is_float(from)) return to == DType::F64 || (to == DType::F32 && from != DType::F64);
  if (ir::dtype_is_float(to)) return ts > fs * 2 || (to == DType::F64 && fs <= 4) || (to == DType::F32 && fs <= 2);
  if (ir::dtype_is_unsigned(from)) return ts > fs || (ir::dtype_is_unsigned(to) && ts == fs);
  return !ir::dtype_is_unsigned(to) && ts >= fs;
}

// The top-level nodes the outputs need (and every collective: each rank takes part in each of
// its collectives, read or not; dropping one would leave the others waiting).
std::vector<char> live_nodes(const Graph& g) {
  std::vector<char> live(g.nodes.size(), 0);
  std::vector<ValueId> work(g.outputs().begin(), g.outputs().end());
  for (NodeId n = 0; n < g.nodes.size(); ++n)
    if (g.nodes[n].op->communicates && g.nodes[n].region == 0)
      for (uint32_t i = 0; i < g.nodes[n].num_outputs; ++i) work.push_back(g.nodes[n].first_output + i);
  while (!work.empty()) {
    const ValueId v = work.back();
    work.pop_back();
    const NodeId p = g.values[v].producer;
    if (p == kNone || live[p]) continue;
    live[p] = 1;
    for (ValueId in : g.inputs(g.nodes[p]))
      if (in != kNone) work.push_back(in);
    for (NodeId d : g.deps(g.nodes[p]))
      for (uint32_t i = 0; i < g.nodes[d].num_outputs; ++i) work.push_back(g.nodes[d].first_output + i);
  }
  return live;
}

// The nodes a graph computes: the live top-level ones and those of its bodies. Passes leave the
// nodes they replaced to dead-code elimination, so the count of all nodes would credit a pass
// with what the ones before it replaced.
size_t live_node_count(const Graph& g) {
  const std::vector<char> live = live_nodes(g);
  size_t count = 0;
  for (NodeId n = 0; n < g.nodes.size(); ++n) count += g.nodes[n].region != 0 || live[n];
  return count;
}

}  // namespace

std::unique_ptr<Graph> eliminate_dead_code(const Graph& g) {
  const std::vector<char> live = live_nodes(g);
  return run_pass(g, [&](Replay&, NodeId n) { return g.nodes[n].region == 0 && !live[n]; });
}

std::unique_ptr<Graph> eliminate_common_subexpressions(const Graph& g) {
  std::unordered_map<std::string, NodeId> seen;  // key -> node of the new graph
  return run_pass(g, [&](Replay& r, NodeId id) {
    const ir::Node& n = g.nodes[id];
    // Two identical receives take two messages; two identical collectives, two exchanges.
    if (n.region != 0 || n.num_bodies || n.num_deps || n.num_notes || n.op->communicates) return false;
    std::ostringstream key;
    key << static_cast<int>(n.op->kind) << '(';
    for (ValueId v : g.inputs(n)) key << (v == kNone ? -1 : static_cast<int64_t>(r.get(v))) << ',';
    key << ')';
    if (n.blob != kNone) {  // constants: by type and a hash of the bytes, compared in full on a match
      const ir::Bytes& bytes = *g.blobs[n.blob];
      key << ir::dtype_name(g.values[n.first_output].dtype) << g.shape_str(g.shape(n.first_output))
          << std::hash<std::string_view>()(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    }
    const ir::Span<ir::AttrValue> attrs = g.node_attrs(n);
    for (size_t i = 0; i < attrs.size(); ++i) {
      const ir::AttrValue& a = attrs[i];
      key << '|' << static_cast<int>(a.kind) << ':';
      if (a.kind == ir::AttrKind::Float) key << a.f;
      else if (a.kind == ir::AttrKind::IntList) for (int64_t v : g.ints_of(a)) key << v << ',';
      else if (a.kind == ir::AttrKind::FloatList) for (double v : g.floats_of(a)) key << v << ',';
      else if (a.kind == ir::AttrKind::String) key << g.string_of(a);
      else key << a.i;
    }
    const auto found = seen.find(key.str());
    const ir::Graph& t = r.to().graph();
    if (found == seen.end() ||
        (n.blob != kNone && *t.blobs[t.nodes[found->second].blob] != *g.blobs[n.blob])) {  // a hash collision
      if (found == seen.end()) seen.emplace(key.str(), r.copy(id));
      else r.copy(id);
      return true;
    }
    const ir::Node& earlier = t.nodes[found->second];
    for (uint32_t i = 0; i < n.num_outputs; ++i) r.set(n.first_output + i, earlier.first_output + i);
    return true;
  });
}

std::unique_ptr<Graph> fold_constants(const Graph& g, int64_t max_elements) {
  return run_pass(g, [&](Replay& r, NodeId id) {
    // A dequantized constant stays whole here: recognize_quantized_ops takes its integers into
    // a quantized op, or folds it itself.
    if (g.nodes[id].op->kind == K::dequantize_linear) return false;
    return fold_node(r, g, id, max_elements);
  });
}

namespace {

// matmul(a, transpose(x, p)) where p brings x's last axis to the second-to-last place is
// matmul(a, transpose(x, p'), transpose_b) with p' keeping the last axis last: the GEMM reads
// the transposed operand in place and what remains moves whole rows (or nothing). A transpose
// that others read too stays whole unless nothing would remain of it: a second, partial copy
// would add work rather than save it.
bool fold_transposes_into_matmul(Replay& r, const Graph& g, const ir::Node& n, const std::vector<uint32_t>& uses) {
  const Graph& t = r.to().graph();
  ValueId operand[2];
  ir::AttrArg flags[2];
  bool changed = false;
  const ir::MatmulAttrs attrs(g, n);
  for (uint32_t k = 0; k < 2; ++k) {
    operand[k] = r.get(g.operands[n.first_input + k]);
    flags[k] = ir::AttrArg::of_bool(k == 0 ? attrs.transpose_a : attrs.transpose_b);
    const ir::Node* p = producer(t, operand[k]);
    const size_t rank = t.shape(operand[k]).rank();
    if (!p || p->op->kind != K::transpose || rank < 2) continue;
    std::vector<int64_t> perm = perm_of(t, *p, rank);
    if (perm[rank - 2] != static_cast<int64_t>(rank - 1)) continue;
    std::swap(perm[rank - 2], perm[rank - 1]);
    const ValueId source = t.operands[p->first_input];
    bool identity = true;
    for (size_t i = 0; i < rank; ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
    if (!identity && uses[g.operands[n.first_input + k]] > 1) continue;  // the transpose is read elsewhere too
    operand[k] = source;
    if (!identity) {
      ir::AttrArg a = ir::AttrArg::of_ints(perm.data(), perm.size());
      const ValueId in[] = {source};
      operand[k] = added(r, *p->op, {in, 1}, {&a, 1});
    }
    flags[k].i = !flags[k].i;
    changed = true;
  }
  if (!changed) return false;
  r.set(n.first_output, added(r, *n.op, {operand, 2}, {flags, 2}));
  return true;
}

}  // namespace

// Whether transpose `n` of an input of shape `in` keeps every axis longer than 1 in its order:
// then it moves no element (`[1,1,4,64]` to `[1,4,1,64]`, how attention splits heads of one
// token). Static, non-empty shapes only: a reshape's spec copies the input's size for a 0.
bool moves_no_element(const Graph& g, const ir::Node& n, const ir::Shape& in) {
  if (!in.is_static() || in.num_elements() == 0) return false;
  const std::vector<int64_t> perm = perm_of(g, n, in.rank());
  int64_t last = -1;
  for (int64_t axis : perm) {
    if (in[static_cast<size_t>(axis)] == 1) continue;
    if (axis < last) return false;
    last = axis;
  }
  return true;
}

// reshape(transpose(reshape(x, [N, a, b, H, W]), [0, 2, 1, 3, 4]), x's shape) with x [N, C, H,
// W] (`transpose` the middle node, `out` the last reshape's shape): a channel shuffle, ShuffleNet's.
// Result channel i·a + j is x's channel j·b + i; the channels in that order, or empty when the
// chain is something else.
std::vector<int64_t> channel_shuffle(const Graph& t, const ir::Node& transpose, const ir::Shape& out) {
  const ir::Node* split = producer(t, t.operands[transpose.first_input]);
  if (!split || split->op->kind != K::reshape || split->num_deps) return {};
  const ir::Shape x = t.shape(t.operands[split->first_input]), mid = t.shape(split->first_output);
  if (x.rank() != 4 || out != x || !x.is_static() || mid.rank() != 5 || perm_of(t, transpose, 5) != std::vector<int64_t>{0, 2, 1, 3, 4} ||
      mid[0] != x[0] || mid[3] != x[2] || mid[4] != x[3] || mid[1] * mid[2] != x[1])
    return {};
  const int64_t a = mid[1], b = mid[2];
  std::vector<int64_t> order(static_cast<size_t>(x[1]));
  for (int64_t c = 0; c < x[1]; ++c) order[static_cast<size_t>(c)] = (c % a) * b + c / a;
  return order;
}

// slice(gather(x, c, axis 1), [s, e) along axis 1, step 1) with c constant: gather(x, c[s:e],
// axis 1), so that each half of a shuffled value is one gather of x's channels.
bool slice_of_gathered_channels(Replay& r, const Graph& g, const ir::Node& slice, const ir::Node& gather) {
  const Graph& t = r.to().graph();
  const ir::SliceAttrs a(g, slice);
  const ValueId indices = t.operands[gather.first_input + 1];
  const ir::Node* c = producer(t, indices);
  if (ir::GatherAttrs(t, gather).axis != 1 || !c || c->blob == kNone || t.values[indices].dtype != ir::DType::I64 ||
      t.shape(indices).rank() != 1 || a.axes.size() != 1 || a.axes[0] != 1 || (!a.steps.empty() && a.steps[0] != 1))
    return false;
  const int64_t channels = t.shape(gather.first_output)[1], count = g.shape(slice.first_output)[1];
  const int64_t start = std::clamp<int64_t>(a.starts[0] < 0 ? a.starts[0] + channels : a.starts[0], 0, channels);
  const int64_t* all = reinterpret_cast<const int64_t*>(t.blobs[c->blob]->data());
  const ValueId in[] = {t.operands[gather.first_input],
                        r.to().add_constant(ir::DType::I64, ir::Shape{count}, all + start, static_cast<size_t>(count) * sizeof(int64_t))};
  ir::AttrArg axis = ir::AttrArg::of_int(1);
  r.set(slice.first_output, added(r, *ir::find_op(K::gather), {in, 2}, {&axis, 1}));
  return true;
}

// An elementwise op's constant operands of lower rank than its result (a batch norm's [C, 1, 1])
// as constants of the result's rank, 1s in front: the same broadcast, which blocked-channel
// kernels then read as one value per channel (runtime/format_assignment.cpp).
bool constants_at_full_rank(Replay& r, const Graph& g, const ir::Node& n) {
  const size_t rank = g.shape(n.first_output).rank();
  std::vector<ValueId> in;
  bool changed = false;
  for (uint32_t i = 0; i < n.num_inputs; ++i) {
    ValueId v = r.get(g.operands[n.first_input + i]);
    const Graph& t = r.to().graph();
    const ir::Node* p = v == kNone ? nullptr : producer(t, v);
    const ir::Shape s = v == kNone ? ir::Shape{} : t.shape(v);
    if (p && p->blob != kNone && s.rank() < rank && s.num_elements() > 1) {
      std::vector<int64_t> dims(rank - s.rank(), 1);
      dims.insert(dims.end(), s.begin(), s.begin() + s.rank());
      v = r.to().add_constant(t.values[v].dtype, ir::Shape::from(dims.data(), dims.size()), t.blobs[p->blob]);  // the same bytes
      changed = true;
    }
    in.push_back(v);
  }
  if (!changed) return false;
  const std::vector<ir::AttrArg> attrs = attrs_of(g, n);
  r.set(n.first_output, added(r, *n.op, {in.data(), in.size()}, {attrs.data(), attrs.size()}));
  return true;
}

namespace {

// Where a simplification rule looks: node `n` of the graph `g` being replayed into `t`, its first
// operand `x` in `t` (kNone without one) and the node `inner` that makes it (its kind, else
// constant), and how many nodes of `g` read each value.
struct Site {
  Replay& r;
  const Graph& g;
  const ir::Node& n;
  const Graph& t;
  ValueId x;
  const ir::Node* inner;
  K inner_kind;
  const std::vector<uint32_t>& uses;
};

// x + 0, x - 0, x * 1, x / 1, 0 + x, 1 * x: x.
bool drop_neutral_operand(const Site& s) {
  if (!is_arithmetic(s.n.op->kind)) return false;
  const ValueId same = neutral_operand(s.r, s.n);
  if (same == kNone) return false;
  s.r.set(s.n.first_output, same);
  return true;
}

bool constants_at_consumer_rank(const Site& s) { return s.n.op->elementwise && constants_at_full_rank(s.r, s.g, s.n); }

bool transposes_into_matmul(const Site& s) { return fold_transposes_into_matmul(s.r, s.g, s.n, s.uses); }

// x ** 2 (how exported layer norms square) is one multiply rather than a call to pow.
bool square_as_multiply(const Site& s) {
  const ValueId base = s.r.get(s.g.operands[s.n.first_input]), exponent = s.r.get(s.g.operands[s.n.first_input + 1]);
  if (!constant_all(s.t, exponent, 2.0) || s.t.shape(base) != s.g.shape(s.n.first_output)) return false;
  const ValueId in[] = {base, base};
  s.r.set(s.n.first_output, added(s.r, *ir::find_op(K::mul), {in, 2}, {}));
  return true;
}

// A cast to the dtype it has is its input; a cast of a lossless cast is one cast (none when it
// comes back to the source's dtype).
bool cast_chain(const Site& s) {
  const ir::DType to = ir::CastAttrs(s.g, s.n).to;
  if (s.t.values[s.x].dtype == to) {
    s.r.set(s.n.first_output, s.x);
    return true;
  }
  if (s.inner_kind != K::cast) return false;
  const ValueId src = s.t.operands[s.inner->first_input];
  if (!lossless(s.t.values[src].dtype, s.t.values[s.x].dtype)) return false;
  if (s.t.values[src].dtype == to) {  // a round trip through a wider dtype
    s.r.set(s.n.first_output, src);
    return true;
  }
  ir::AttrArg a = ir::AttrArg::of_dtype(to);
  const ValueId in[] = {src};
  s.r.set(s.n.first_output, added(s.r, *s.n.op, {in, 1}, {&a, 1}));
  return true;
}

// A transpose of a transpose: the permutations composed; nothing is left when they cancel.
bool transpose_chain(const Site& s) {
  const size_t rank = s.g.shape(s.n.first_output).rank();
  const std::vector<int64_t> outer = perm_of(s.g, s.n, rank), first = perm_of(s.t, *s.inner, rank);
  std::vector<int64_t> composed(rank);
  bool identity = true;
  for (size_t i = 0; i < rank; ++i) {
    composed[i] = first[static_cast<size_t>(outer[i])];
    identity = identity && composed[i] == static_cast<int64_t>(i);
  }
  const ValueId src = s.t.operands[s.inner->first_input];
  if (identity) {
    s.r.set(s.n.first_output, src);
    return true;
  }
  ir::AttrArg a = ir::AttrArg::of_ints(composed.data(), composed.size());
  const ValueId in[] = {src};
  s.r.set(s.n.first_output, added(s.r, *s.n.op, {in, 1}, {&a, 1}));
  return true;
}

// A transpose of size-1 axes only is a reshape, which the memory plan makes in place; of a
// reshape, one reshape of its source.
bool transpose_as_reshape(const Site& s) {
  if (!moves_no_element(s.g, s.n, s.t.shape(s.x))) return false;
  const ir::Shape shape = s.g.shape(s.n.first_output);
  std::vector<int64_t> spec(shape.begin(), shape.end());
  ir::AttrArg a = ir::AttrArg::of_ints(spec.data(), spec.size());
  const ValueId in[] = {s.inner_kind == K::reshape ? s.t.operands[s.inner->first_input] : s.x};
  s.r.set(s.n.first_output, added(s.r, *ir::find_op(K::reshape), {in, 1}, {&a, 1}));
  return true;
}

// A channel shuffle (reshape, transpose, reshape): one gather of the channels, which kernels over
// blocked channels run where they lie (three launches and two row-major copies before).
bool channel_shuffle_as_gather(const Site& s) {
  const std::vector<int64_t> perm = channel_shuffle(s.t, *s.inner, s.g.shape(s.n.first_output));
  if (perm.empty()) return false;
  const ValueId in[] = {s.t.operands[producer(s.t, s.t.operands[s.inner->first_input])->first_input],
                        s.r.to().add_constant(ir::DType::I64, ir::Shape{static_cast<int64_t>(perm.size())}, perm.data(),
                                              perm.size() * sizeof(int64_t))};
  ir::AttrArg axis = ir::AttrArg::of_int(1);
  s.r.set(s.n.first_output, added(s.r, *ir::find_op(K::gather), {in, 2}, {&axis, 1}));
  return true;
}

bool slice_of_gather(const Site& s) { return slice_of_gathered_channels(s.r, s.g, s.n, *s.inner); }

// A reshape of a reshape: one reshape of the source, or the source when it has the shape.
bool reshape_chain(const Site& s) {
  const ir::Shape shape = s.g.shape(s.n.first_output);
  if (!shape.is_static() || shape.num_elements() == 0) return false;  // a 0 in a reshape's spec copies the input's size
  const ValueId src = s.t.operands[s.inner->first_input];
  if (shape == s.t.shape(src)) {
    s.r.set(s.n.first_output, src);
    return true;
  }
  std::vector<int64_t> spec(shape.begin(), shape.end());
  ir::AttrArg a = ir::AttrArg::of_ints(spec.data(), spec.size());
  const ValueId in[] = {src};
  s.r.set(s.n.first_output, added(s.r, *s.n.op, {in, 1}, {&a, 1}));
  return true;
}

// conv2d(pad(x)) where the pad adds zeros to the height and width only: the convolution pads x
// itself (TF's ZeroPadding2D before a strided convolution). Exact: the padding is the same
// zeros. Padding with -0 stays, whose products could flip the sign of an all-zero window's sum.
bool zero_pad_into_conv(const Site& s) {
  const ir::Node& pad = *s.inner;
  const ir::Span<int64_t> p = s.t.ints_of(s.t.attrs[pad.first_attr]);
  const ir::AttrValue& mode = s.t.attrs[pad.first_attr + 1];
  const ir::AttrValue& value = s.t.attrs[pad.first_attr + 2];
  if (mode.i != 0 || value.f != 0.0 || std::signbit(value.f) || p.size() != 8) return false;
  if (p[0] || p[1] || p[4] || p[5] || std::any_of(p.begin(), p.end(), [](int64_t v) { return v < 0; })) return false;
  std::vector<ir::AttrArg> attrs = attrs_of(s.g, s.n);  // strides, pads, dilations, groups
  const ir::Span<int64_t> own = s.g.ints_of(s.g.attrs[s.n.first_attr + 1]);  // top, left, bottom, right
  const int64_t pads[] = {own[0] + p[2], own[1] + p[3], own[2] + p[6], own[3] + p[7]};
  attrs[1] = ir::AttrArg::of_ints(pads, 4);
  std::vector<ValueId> in = {s.t.operands[pad.first_input]};
  for (uint32_t i = 1; i < s.n.num_inputs && s.g.operands[s.n.first_input + i] != kNone; ++i)
    in.push_back(s.r.get(s.g.operands[s.n.first_input + i]));
  s.r.set(s.n.first_output, added(s.r, *s.n.op, {in.data(), in.size()}, {attrs.data(), attrs.size()}));
  return true;
}

// simplify's rewrites, tried in order on each node: the first that applies replaces it. A rule
// names the node's kind and the kind of the node making its first operand it looks at (none:
// any).
struct SimplifyRule {
  std::optional<K> kind, inner;
  bool (*rewrite)(const Site&);
};
const SimplifyRule kSimplifyRules[] = {
    {{}, {}, drop_neutral_operand},
    {{}, {}, constants_at_consumer_rank},
    {K::matmul, {}, transposes_into_matmul},
    {K::pow, {}, square_as_multiply},
    {K::cast, {}, cast_chain},
    {K::transpose, K::transpose, transpose_chain},
    {K::transpose, {}, transpose_as_reshape},
    {K::reshape, K::transpose, channel_shuffle_as_gather},
    {K::slice, K::gather, slice_of_gather},
    {K::reshape, K::reshape, reshape_chain},
    {K::conv2d, K::pad, zero_pad_into_conv},
};

}  // namespace

std::unique_ptr<Graph> simplify(const Graph& g) {
  const std::vector<uint32_t> uses = use_counts(g);
  return run_pass(g, [&](Replay& r, NodeId id) {
    const ir::Node& n = g.nodes[id];
    if (n.region != 0 || n.num_bodies || n.num_deps) return false;
    const Graph& t = r.to().graph();
    const ValueId x = n.num_inputs == 0 || g.operands[n.first_input] == kNone ? kNone : r.get(g.operands[n.first_input]);
    const ir::Node* inner = x == kNone ? nullptr : producer(t, x);
    const Site site{r, g, n, t, x, inner, inner ? inner->op->kind : K::constant, uses};
    for (const SimplifyRule& rule : kSimplifyRules)
      if ((!rule.kind || *rule.kind == n.op->kind) && (!rule.inner || (inner && *rule.inner == inner->op->kind)) && rule.rewrite(site))
        return true;
    return false;
  });
}

namespace {

// The f32 values of a constant of the graph being built, or empty if `v` is not an f32 constant.
std::vector<double> constant_values(const Graph& t, ValueId v) {
  const ir::Node* p = producer(t, v);
  if (!p || p->blob == kNone || t.values[v].dtype != ir::DType::F32) return {};
  const float* data = reinterpret_cast<const float*>(t.blobs[p->blob]->data());
  return std::vector<double>(data, data + t.shape(v).num_elements());
}

// Whether constant `c` of shape `s` holds one value per channel of a [N, O, H, W] result (it
// broadcasts as [O, 1, 1] or [1, O, 1, 1]) or one value in all.
bool per_channel(const ir::Shape& s, int64_t channels) {
  if (s.num_elements() == 1) return true;
  if (s.num_elements() != channels || s.rank() < 3 || s.rank() > 4) return false;
  return s[s.rank() - 1] == 1 && s[s.rank() - 2] == 1 && s[s.rank() - 3] == channels;
}

}  // namespace

std::unique_ptr<Graph> fold_affine_into_conv(const Graph& g) {
  const std::vector<uint32_t> uses = use_counts(g);
  return run_pass(g, [&](Replay& r, NodeId id) {
    const ir::Node& n = g.nodes[id];
    const K kind = n.op->kind;
    const bool add = kind == K::add, sub = kind == K::sub, mul = kind == K::mul, div = kind == K::div;
    if (n.region != 0 || n.num_deps || !is_arithmetic(kind)) return false;
    const Graph& t = r.to().graph();
    // Which operand is the convolution (the other is the constant); sub and div only as conv ∘ c.
    for (uint32_t k = 0; k < 2; ++k) {
      if (k == 1 && (sub || div)) break;
      const ValueId old_conv = g.operands[n.first_input + k];
      const ValueId conv = r.get(old_conv), c = r.get(g.operands[n.first_input + 1 - k]);
      const ir::Node* p = producer(t, conv);
      if (!p || p->op->kind != K::conv2d || uses[old_conv] != 1 || t.values[conv].dtype != ir::DType::F32) continue;
      if (g.shape(n.first_output) != t.shape(conv)) continue;  // the affine op must not broadcast the result
      const int64_t channels = t.shape(conv)[1];
      const std::vector<double> cv = constant_values(t, c);
      std::vector<double> w = constant_values(t, t.operands[p->first_input + 1]);
      const ValueId old_bias = p->num_inputs > 2 ? t.operands[p->first_input + 2] : kNone;
      std::vector<double> b = old_bias == kNone ? std::vector<double>(static_cast<size_t>(channels), 0.0) : constant_values(t, old_bias);
      if (cv.empty() || w.empty() || b.size() != static_cast<size_t>(channels) || !per_channel(t.shape(c), channels)) continue;
      // Only finite, and for a division non-zero, factors: conv / 0 is ±inf per element, but
      // folded its weights would become inf and NaN.
      if (!std::all_of(cv.begin(), cv.end(), [&](double v) { return std::isfinite(v) && (!div || v != 0); })) continue;
      const size_t per_out = w.size() / static_cast<size_t>(channels);
      for (size_t o = 0; o < static_cast<size_t>(channels); ++o) {
        const double v = cv[cv.size() == 1 ? 0 : o];
        if (add || sub) {
          b[o] += add ? v : -v;
          continue;
        }
        const double f = mul ? v : 1.0 / v;
        b[o] *= f;
        for (size_t i = 0; i < per_out; ++i) w[o * per_out + i] *= f;
      }
      // What the new node needs from the old one, copied before the builder grows the graph
      // (which moves its nodes and lists).
      const ir::OpSchema& op = *p->op;
      const ValueId x = t.operands[p->first_input];
      const ir::Shape w_shape = t.shape(t.operands[p->first_input + 1]);
      std::vector<std::vector<int64_t>> lists(op.attrs.size());
      std::vector<ir::AttrArg> attrs;
      for (size_t i = 0; i < op.attrs.size(); ++i) {
        const ir::AttrValue& a = t.attrs[p->first_attr + i];
        if (a.kind == ir::AttrKind::IntList) {
          const ir::Span<int64_t> s = t.ints_of(a);
          lists[i].assign(s.begin(), s.end());
          attrs.push_back(ir::AttrArg::of_ints(lists[i].data(), lists[i].size()));
        } else {
          attrs.push_back(ir::AttrArg::of_int(a.i));
        }
      }
      const auto finite_f32 = [](double v) { return std::isfinite(static_cast<float>(v)); };
      if (!std::all_of(w.begin(), w.end(), finite_f32) || !std::all_of(b.begin(), b.end(), finite_f32)) continue;
      auto f32_constant = [&](const std::vector<double>& values, const ir::Shape& shape) {
        std::vector<float> data(values.begin(), values.end());
        return r.to().add_constant(ir::DType::F32, shape, data.data(), data.size() * sizeof(float));
      };
      const ValueId in[] = {x, f32_constant(w, w_shape), f32_constant(b, ir::Shape{channels})};
      r.set(n.first_output, added(r, op, {in, 3}, {attrs.data(), attrs.size()}));
      return true;
    }
    return false;
  });
}

namespace {

// Whether `m` is a reduce_mean keeping its dims over the trailing axes from some axis on; which.
bool trailing_mean(const Graph& g, const ir::Node* m, size_t* first) {
  if (!m || m->op->kind != K::reduce_mean) return false;
  const ir::ReduceMeanAttrs a(g, *m);
  std::vector<size_t> axes = a.axes;
  std::sort(axes.begin(), axes.end());
  const size_t rank = g.shape(operand(g, *m, 0)).rank();
  if (!a.keepdims || axes.empty() || axes.back() != rank - 1) return false;
  for (size_t i = 1; i < axes.size(); ++i)
    if (axes[i] != axes[i - 1] + 1) return false;
  *first = axes.front();
  return true;
}

// The value of a one-element f32 or f64 constant of `g`.
bool scalar_constant(const Graph& g, ValueId v, double* value) {
  const ir::Node* p = producer(g, v);
  if (!p || p->blob == kNone || g.shape(v).num_elements() != 1) return false;
  const ir::Bytes& bytes = *g.blobs[p->blob];
  if (g.values[v].dtype == ir::DType::F32) {
    float f;
    std::memcpy(&f, bytes.data(), sizeof f);
    *value = f;
    return true;
  }
  if (g.values[v].dtype == ir::DType::F64) {
    std::memcpy(value, bytes.data(), sizeof *value);
    return true;
  }
  return false;
}

// (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps), means over the same trailing axes: how
// exporters (PyTorch's ONNX export, torch.fx of hand-written norms) spell a layer norm. Matched
// at the division; its x, first axis and epsilon.
bool exported_layer_norm(const Graph& g, const ir::Node& div, ValueId* x, size_t* axis, double* epsilon) {
  const ValueId centered = operand(g, div, 0);
  const ir::Node* root = made_by(g, operand(g, div, 1), K::sqrt);
  const ir::Node* plus = root ? made_by(g, operand(g, *root, 0), K::add) : nullptr;
  if (!plus) return false;
  const ir::Node* var = nullptr;
  for (uint32_t i = 0; i < 2 && !var; ++i)
    if (scalar_constant(g, operand(g, *plus, 1 - i), epsilon)) var = made_by(g, operand(g, *plus, i), K::reduce_mean);
  size_t var_axis = 0, mean_axis = 0;
  if (!var || !trailing_mean(g, var, &var_axis)) return false;
  const ir::Node* square = producer(g, operand(g, *var, 0));
  double two = 0;
  const bool squares = square && ((square->op->kind == K::mul && operand(g, *square, 0) == centered && operand(g, *square, 1) == centered) ||
                                  (square->op->kind == K::pow && operand(g, *square, 0) == centered &&
                                   scalar_constant(g, operand(g, *square, 1), &two) && two == 2.0));
  const ir::Node* sub = squares ? made_by(g, centered, K::sub) : nullptr;
  const ir::Node* mean = sub ? made_by(g, operand(g, *sub, 1), K::reduce_mean) : nullptr;
  if (!mean || operand(g, *mean, 0) != operand(g, *sub, 0) || !trailing_mean(g, mean, &mean_axis) || mean_axis != var_axis)
    return false;
  *x = operand(g, *sub, 0);
  *axis = mean_axis;
  return *epsilon >= 0 && g.shape(*x) == g.shape(div.first_output);
}

// x · sigmoid(x), either way round, in a floating dtype: SiLU as exporters write it; its x.
bool exported_silu(const Graph& g, const ir::Node& mul, ValueId* x) {
  for (uint32_t i = 0; i < 2; ++i) {
    const ir::Node* sig = made_by(g, operand(g, mul, 1 - i), K::sigmoid);
    if (sig && operand(g, *sig, 0) == operand(g, mul, i) && g.shape(operand(g, mul, i)) == g.shape(mul.first_output)) {
      *x = operand(g, mul, i);
      return true;
    }
  }
  return false;
}

// Whether `v` is a constant within f32 rounding of `want`.
bool about(const Graph& g, ValueId v, double want) {
  double c = 0;
  return scalar_constant(g, v, &c) && std::abs(c - want) <= 1e-6 * std::abs(want);
}

// Whether `v` is erf(x / √2) + 1, the scaling also as x · (1/√2) and the sum either way round.
bool erf_plus_one(const Graph& g, ValueId v, ValueId x) {
  const ir::Node* add = made_by(g, v, K::add);
  const ir::Node* erf = nullptr;
  for (uint32_t k = 0; add && k < 2 && !erf; ++k)
    if (about(g, operand(g, *add, 1 - k), 1.0)) erf = made_by(g, operand(g, *add, k), K::erf);
  const ir::Node* scale = erf ? producer(g, operand(g, *erf, 0)) : nullptr;
  if (!scale) return false;
  if (scale->op->kind == K::div) return operand(g, *scale, 0) == x && about(g, operand(g, *scale, 1), std::sqrt(2.0));
  return scale->op->kind == K::mul &&
         ((operand(g, *scale, 0) == x && about(g, operand(g, *scale, 1), 1 / std::sqrt(2.0))) ||
          (operand(g, *scale, 1) == x && about(g, operand(g, *scale, 0), 1 / std::sqrt(2.0))));
}

// x · (erf(x / √2) + 1) · 0.5, the three factors multiplied in any order: GELU as PyTorch's
// ONNX export writes it (Div, Erf, Add, Mul, Mul). Matched at the last multiply; its x.
bool exported_gelu(const Graph& g, const ir::Node& mul, ValueId* x) {
  static constexpr int kOrders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (uint32_t i = 0; i < 2; ++i) {
    const ir::Node* inner = made_by(g, operand(g, mul, i), K::mul);
    if (!inner) continue;
    const ValueId factors[3] = {operand(g, *inner, 0), operand(g, *inner, 1), operand(g, mul, 1 - i)};
    for (const auto& order : kOrders) {
      const ValueId half = factors[order[0]], plus = factors[order[1]], rest = factors[order[2]];
      if (about(g, half, 0.5) && g.shape(rest) == g.shape(mul.first_output) && erf_plus_one(g, plus, rest)) {
        *x = rest;
        return true;
      }
    }
  }
  return false;
}

// v / c, v · c or c · v with c a scalar constant: v and the factor.
bool scaled_by_constant(const Graph& g, ValueId scaled, ValueId* v, double* factor) {
  const ir::Node* p = producer(g, scaled);
  double c = 0;
  if (!p || (p->op->kind != K::div && p->op->kind != K::mul)) return false;
  if (p->op->kind == K::div && scalar_constant(g, operand(g, *p, 1), &c) && c != 0) *v = operand(g, *p, 0), *factor = 1 / c;
  else if (p->op->kind == K::mul && scalar_constant(g, operand(g, *p, 1), &c)) *v = operand(g, *p, 0), *factor = c;
  else if (p->op->kind == K::mul && scalar_constant(g, operand(g, *p, 0), &c)) *v = operand(g, *p, 1), *factor = c;
  else return false;
  return g.shape(*v) == g.shape(scaled) && g.values[*v].dtype == g.values[scaled].dtype;
}

// Attention's scores as exporters write them: softmax(s / c + m) or softmax(s · c + m), the
// mask optional, added either way round and broadcasting to the scores without changing their
// shape, c a scalar constant (MatMul, Div, Add, Softmax); or softmax(matmul(q · c1, k · c2) + m),
// the scale on either operand of the product or split between both (PyTorch's export of
// nn.MultiheadAttention: q / c before 2.x, q · √c and kᵀ · √c since). Matched at a softmax
// without a mask or scale of its own; the scale, the mask (kNone without one), and either the
// scores or (`product` set) the product whose operands `a` and `b` replace the scaled ones.
struct AttentionScores {
  ValueId scores = kNone, mask = kNone, a = kNone, b = kNone;
  double scale = 1;
  const ir::Node* product = nullptr;
};

bool exported_attention_scores(const Graph& g, const ir::Node& softmax, AttentionScores* a) {
  const ir::SoftmaxAttrs attrs(g, softmax);
  if (softmax.num_inputs > 1 && operand(g, softmax, 1) != kNone) return false;
  if (attrs.scale != 1.0) return false;
  ValueId logits = operand(g, softmax, 0);
  if (g.shape(logits) != g.shape(softmax.first_output)) return false;
  // A mask added to the scaled scores (or to a product of a scaled operand).
  if (const ir::Node* add = made_by(g, logits, K::add)) {
    for (uint32_t i = 0; i < 2 && a->mask == kNone; ++i) {
      const ValueId s = operand(g, *add, i), m = operand(g, *add, 1 - i);
      const ir::Node* p = producer(g, s);
      if (p && (p->op->kind == K::div || p->op->kind == K::mul || p->op->kind == K::matmul) && g.shape(s) == g.shape(logits) &&
          g.values[m].dtype == g.values[s].dtype)
        logits = s, a->mask = m;
    }
  }
  if (scaled_by_constant(g, logits, &a->scores, &a->scale)) return true;
  const ir::Node* product = made_by(g, logits, K::matmul);
  if (!product) return false;
  double scale_a = 1, scale_b = 1;
  a->a = operand(g, *product, 0), a->b = operand(g, *product, 1);
  const bool scaled_a = scaled_by_constant(g, a->a, &a->a, &scale_a), scaled_b = scaled_by_constant(g, a->b, &a->b, &scale_b);
  if (!scaled_a && !scaled_b) return false;
  a->scale = scale_a * scale_b;
  a->product = product;
  return true;
}

}  // namespace

std::unique_ptr<Graph> recognize_exported_ops(const Graph& g) {
  return run_pass(g, [&](Replay& r, NodeId id) {
    const ir::Node& n = g.nodes[id];
    if (n.region != 0 || n.num_deps || !ir::dtype_is_float(g.values[n.first_output].dtype)) return false;
    ValueId x;
    size_t axis;
    double epsilon;
    if (n.op->kind == K::div && exported_layer_norm(g, n, &x, &axis, &epsilon)) {
      ir::AttrArg attrs[2] = {ir::AttrArg::of_int(static_cast<int64_t>(axis)), ir::AttrArg::of_float(epsilon)};
      const ValueId in[] = {r.get(x), kNone, kNone};
      r.set(n.first_output, added(r, *ir::find_op(K::layer_norm), {in, 3}, {attrs, 2}));
      return true;
    }
    const bool silu = n.op->kind == K::mul && exported_silu(g, n, &x);
    if (silu || (n.op->kind == K::mul && exported_gelu(g, n, &x))) {
      const ValueId in[] = {r.get(x)};
      ir::AttrArg approximate[1] = {ir::AttrArg::of_enum(static_cast<int64_t>(ir::GeluApproximate::none))};  // the erf form
      r.set(n.first_output, silu ? added(r, *ir::find_op(K::silu), {in, 1}, {}) : added(r, *ir::find_op(K::gelu), {in, 1}, {approximate, 1}));
      return true;
    }
    AttentionScores a;
    if (n.op->kind == K::softmax && exported_attention_scores(g, n, &a)) {
      ValueId scores = a.scores == kNone ? kNone : r.get(a.scores);
      if (a.product) {  // the product again, of the unscaled operands
        const ir::MatmulAttrs m(g, *a.product);
        ir::AttrArg flags[2] = {ir::AttrArg::of_bool(m.transpose_a), ir::AttrArg::of_bool(m.transpose_b)};
        const ValueId operands[] = {r.get(a.a), r.get(a.b)};
        scores = added(r, *ir::find_op(K::matmul), {operands, 2}, {flags, 2});
      }
      ir::AttrArg attrs[2] = {ir::AttrArg::of_int(static_cast<int64_t>(ir::SoftmaxAttrs(g, n).axis)), ir::AttrArg::of_float(a.scale)};
      const ValueId in[] = {scores, a.mask == kNone ? kNone : r.get(a.mask)};
      r.set(n.first_output, added(r, *ir::find_op(K::softmax), {in, 2}, {attrs, 2}));
      return true;
    }
    return false;
  });
}

std::unique_ptr<Graph> optimize(const Graph& g, bool verify, std::vector<std::string>* log) {
  using Pass = std::unique_ptr<Graph> (*)(const Graph&);
  const std::pair<const char*, Pass> pipeline[] = {
      {"simplify (x*1, x+0, transpose/reshape/cast chains, transposes into matmul, transposes of size-1 axes as reshapes, "
       "channel shuffles and their slices as gathers, constants at their consumer's rank, zero pads into convolutions)",
       simplify},
      {"fold constants", [](const Graph& x) { return fold_constants(x); }},
      {"recognize quantized convolutions, pools and products (dequantize, conv2d, max_pool2d or matmul, relu or clip, quantize)", recognize_quantized_ops},
      {"recognize exported layer norms, SiLU, GELU and attention's scaled, masked softmax", recognize_exported_ops},
      {"recognize attention (two products around a softmax)", recognize_attention},
      {"simplify the views recognition left", simplify},
      {"fold affine ops into convolutions", fold_affine_into_conv},
      {"eliminate common subexpressions", eliminate_common_subexpressions},
      {"eliminate dead code", eliminate_dead_code},
  };
  std::unique_ptr<Graph> cur = std::make_unique<Graph>(g);
  for (const auto& [name, pass] : pipeline) {
    const size_t before = log ? live_node_count(*cur) : 0;
    const auto t0 = std::chrono::steady_clock::now();
    cur = pass(*cur);
    if (verify) ir::verify(*cur);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (log) {
      std::ostringstream line;
      line.precision(1);
      line << std::fixed << name << ": " << before << " -> " << live_node_count(*cur) << " nodes (" << us << " us"
           << (verify ? ", verified" : "") << ")";
      log->push_back(line.str());
    }
  }
  return cur;
}

}  // namespace esg::passes
