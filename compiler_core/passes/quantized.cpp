// ONNX's QDQ form as quantized ops: dequantize_linear → conv2d (→ relu or clip) → quantize_linear, its
// filters dequantized from constant integers, becomes one quantized_conv2d over the integers
// themselves (DESIGN 14: integer primitives, never f32 on dequantized copies); a matmul of
// dequantized activations and dequantized constant weights becomes matmul_integer over the
// integers, its int32 sums scaled back to f32 (what follows, a bias, a quantize, stays as the
// graph says, and fuses into one kernel after it); a sum of two dequantized values, quantized,
// becomes quantized_add. Dequantized constants nothing absorbs are folded here, as
// fold_constants leaves them.
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "eval/host_tensor.hpp"
#include "ir/op_attrs.gen.hpp"
#include "passes/passes.hpp"
#include "passes/rewrite.hpp"

namespace esg::passes {
namespace {

using ir::Graph;
using ir::kNone;
using ir::NodeId;
using ir::ValueId;
using K = ir::OpKind;

// Whether a dequantize or quantize node's scale and zero point are one constant value each.
bool one_constant_pair(const Graph& g, const ir::Node& n) {
  for (uint32_t i : {1u, 2u}) {
    const eval::TensorRef c = constant_data(g, operand(g, n, i));
    if (!c.bytes || c.size() != 1) return false;
  }
  return true;
}

// A constant holding one value, or one per output channel of a filter (`channels`) laid along
// its first axis ([O] or [O, 1, 1, 1]): its values, else empty.
std::vector<double> per_output_channel(const Graph& g, ValueId v, int64_t channels) {
  const eval::TensorRef c = constant_data(g, v);
  if (!c.bytes) return {};
  const ir::Shape& s = c.shape;
  const bool along_first = s.rank() >= 1 && s[0] == channels && c.size() == channels;
  if (c.size() != 1 && !along_first) return {};
  std::vector<double> values;
  for (int64_t i = 0; i < c.size(); ++i) values.push_back(eval::load_f(c, i));
  return values;
}

// A Relu or Clip that a quantized op folds into its result's bounds: the node, and the bounds.
struct Bounds {
  NodeId clip = kNone;
  double min = -INFINITY, max = INFINITY;
};

// `v`, or what the Relu or Clip that makes it (read by nothing else) bounds, with `bounds` set.
ValueId unclipped(const Graph& g, ValueId v, const std::vector<uint32_t>& uses, Bounds& bounds) {
  if (uses[v] != 1) return v;
  if (const ir::Node* relu = made_by(g, v, K::relu)) {
    bounds.clip = g.values[v].producer;
    bounds.min = 0;
    return operand(g, *relu, 0);
  }
  if (const ir::Node* clip = made_by(g, v, K::clip)) {
    bounds.clip = g.values[v].producer;
    const ir::ClipAttrs a(g, *clip);
    bounds.min = a.min, bounds.max = a.max;
    return operand(g, *clip, 0);
  }
  return v;
}

// The `kind` node whose result quantize `q` reads (through a Relu or Clip, set in `bounds`), read
// by nothing else and with no ordering dependencies; its id in `id`. Else nullptr.
const ir::Node* quantized_result(const Graph& g, const ir::Node& q, K kind, const std::vector<uint32_t>& uses, Bounds& bounds,
                                 NodeId& id) {
  if (q.region != 0) return nullptr;
  const ValueId v = unclipped(g, operand(g, q, 0), uses, bounds);
  const ir::Node* n = made_by(g, v, kind);
  if (!n || uses[v] != 1 || n->num_deps) return nullptr;
  id = g.values[v].producer;
  return n;
}

// One match, found at its quantize node.
struct Match {
  NodeId conv = kNone;
  Bounds bounds;  // a relu or clip between the convolution and the quantize
  const ir::Node* x = nullptr;  // the images' dequantize
  const ir::Node* w = nullptr;  // the filters'
  std::vector<double> w_scale, w_zero_point, bias;  // bias: f32 values, or empty
};

std::optional<Match> match_at(const Graph& g, const ir::Node& q, const std::vector<uint32_t>& uses) {
  if (!one_constant_pair(g, q)) return std::nullopt;
  Match m;
  const ir::Node* conv = quantized_result(g, q, K::conv2d, uses, m.bounds, m.conv);
  if (!conv) return std::nullopt;
  m.x = made_by(g, operand(g, *conv, 0), K::dequantize_linear);
  m.w = made_by(g, operand(g, *conv, 1), K::dequantize_linear);
  if (!m.x || !m.w || !one_constant_pair(g, *m.x) || !constant_data(g, operand(g, *m.w, 0)).bytes) return std::nullopt;
  const int64_t channels = g.shape(operand(g, *m.w, 0))[0];
  m.w_scale = per_output_channel(g, operand(g, *m.w, 1), channels);
  m.w_zero_point = per_output_channel(g, operand(g, *m.w, 2), channels);
  if (m.w_scale.empty() || m.w_zero_point.empty()) return std::nullopt;
  if (conv->num_inputs > 2 && operand(g, *conv, 2) != kNone) {
    m.bias = per_output_channel(g, operand(g, *conv, 2), channels);
    if (m.bias.size() != static_cast<size_t>(channels)) return std::nullopt;
  }
  return m;
}

// The f32 bias as the int32 sums' own: b / (x_scale · w_scale) rounded, which gives back the
// integers exactly when the bias was dequantized with that scale (ONNX Runtime's quantizer
// quantizes it so). Empty when a scale is 0 or a value leaves int32.
std::vector<int32_t> bias_as_sums(const Match& m, double x_scale) {
  std::vector<int32_t> out;
  for (size_t o = 0; o < m.bias.size(); ++o) {
    const float scale = static_cast<float>(x_scale) * static_cast<float>(m.w_scale[m.w_scale.size() == 1 ? 0 : o]);
    const double q = std::nearbyint(m.bias[o] / static_cast<double>(scale));
    if (scale == 0 || !(std::fabs(q) < 2147483647.0)) return {};
    out.push_back(static_cast<int32_t>(q));
  }
  return out;
}

// Whether dequantize `d` and quantize `q` have the same scale and zero point (values, and the
// zero points' dtype): then quantize(f(dequantize(x))) is f(x) for an f that only picks among
// its operand's values, as max_pool2d does.
bool same_quantization(const Graph& g, const ir::Node& d, const ir::Node& q) {
  for (uint32_t i : {1u, 2u}) {
    const eval::TensorRef a = constant_data(g, operand(g, d, i)), b = constant_data(g, operand(g, q, i));
    if (!a.bytes || !b.bytes || a.size() != 1 || b.size() != 1 || a.dtype != b.dtype || eval::load_f(a, 0) != eval::load_f(b, 0))
      return false;
  }
  return true;
}

// quantize(max_pool2d(dequantize(x))) with one scale and zero point on both sides: the pool of
// x itself (ONNX Runtime drops such Q/DQ pairs too). The pool node, else nullptr.
const ir::Node* pool_of_integers(const Graph& g, const ir::Node& q, const std::vector<uint32_t>& uses) {
  const ValueId pooled = operand(g, q, 0);
  const ir::Node* pool = made_by(g, pooled, K::max_pool2d);
  if (q.region != 0 || !pool || uses[pooled] != 1) return nullptr;
  const ir::Node* d = made_by(g, operand(g, *pool, 0), K::dequantize_linear);
  return d && same_quantization(g, *d, q) ? pool : nullptr;
}

// A product of dequantized values: matmul(dequantize(x), dequantize(w)) with x's scale and zero
// point one constant each and w a constant integer matrix whose scale and zero point hold one
// value or one per column of the product (w [K, N]: along its last axis; transposed, [N, K]:
// along its first, [N, 1]).
struct Product {
  const ir::Node* x = nullptr;  // the activations' dequantize
  const ir::Node* w = nullptr;  // the weights'
  bool transpose_b = false;
  std::vector<double> w_scale, w_zero_point;
};

// A constant's values when it holds one, or one per column of the product (`columns`) laid as
// `transposed` says; else empty.
std::vector<double> per_column(const Graph& g, ValueId v, int64_t columns, bool transposed) {
  const eval::TensorRef c = constant_data(g, v);
  if (!c.bytes) return {};
  const ir::Shape& s = c.shape;
  const bool along = c.size() == columns && s.rank() >= 1 &&
                     (transposed ? s.rank() == 2 && s[0] == columns : s[s.rank() - 1] == columns);
  if (c.size() != 1 && !along) return {};
  std::vector<double> values;
  for (int64_t i = 0; i < c.size(); ++i) values.push_back(eval::load_f(c, i));
  return values;
}

std::optional<Product> product_at(const Graph& g, const ir::Node& n) {
  if (n.op->kind != K::matmul || n.region != 0 || n.num_deps) return std::nullopt;
  const ir::MatmulAttrs attrs(g, n);
  Product p;
  p.transpose_b = attrs.transpose_b;
  p.x = made_by(g, operand(g, n, 0), K::dequantize_linear);
  p.w = made_by(g, operand(g, n, 1), K::dequantize_linear);
  if (attrs.transpose_a || !p.x || !p.w || !one_constant_pair(g, *p.x)) return std::nullopt;
  // Dequantizing keeps each operand's shape (parameters of more axes than it would widen it).
  for (const ir::Node* d : {p.x, p.w})
    if (g.shape(d->first_output) != g.shape(operand(g, *d, 0))) return std::nullopt;
  const ValueId w = operand(g, *p.w, 0);
  if (!constant_data(g, w).bytes || g.shape(w).rank() != 2) return std::nullopt;
  const int64_t columns = g.shape(w)[p.transpose_b ? 0 : 1];
  p.w_scale = per_column(g, operand(g, *p.w, 1), columns, p.transpose_b);
  p.w_zero_point = per_column(g, operand(g, *p.w, 2), columns, p.transpose_b);
  if (p.w_scale.empty() || p.w_zero_point.empty()) return std::nullopt;
  return p;
}

// matmul_integer of the integers, its sums cast to f32 and scaled by x_scale · w_scale (in f32,
// one per column or one for all): what the product of the dequantized values is, summed exactly.
ValueId integer_product(ir::Replay& r, const Graph& g, const Product& p) {
  const ValueId w = operand(g, *p.w, 0);
  const ir::DType w_type = g.values[w].dtype;
  const ir::Shape ws = g.shape(w);
  const int64_t k = ws[p.transpose_b ? 1 : 0], n = ws[p.transpose_b ? 0 : 1];
  ValueId weights = r.get(w);
  if (p.transpose_b) {  // the integers as [K, N], once, at compile time
    const eval::TensorRef from = constant_data(g, w);
    std::vector<uint8_t> moved(static_cast<size_t>(k * n));
    for (int64_t row = 0; row < n; ++row)
      for (int64_t col = 0; col < k; ++col) moved[static_cast<size_t>(col * n + row)] = from.data<uint8_t>()[row * k + col];
    weights = r.to().add_constant(w_type, ir::Shape{k, n}, moved.data(), moved.size());
  }
  ValueId w_zero_point = r.get(operand(g, *p.w, 2));
  if (p.w_zero_point.size() > 1) {
    eval::HostTensor t(w_type, ir::Shape{n});
    for (int64_t j = 0; j < n; ++j) eval::store_f(t, j, p.w_zero_point[static_cast<size_t>(j)]);
    w_zero_point = r.to().add_constant(w_type, t.shape, t.bytes.data(), t.bytes.size());
  }
  const ValueId in[] = {r.get(operand(g, *p.x, 0)), weights, r.get(operand(g, *p.x, 2)), w_zero_point};
  const ValueId sums = added(r, *ir::find_op(K::matmul_integer), {in, 4}, {});
  const ir::AttrArg to = ir::AttrArg::of_dtype(ir::DType::F32);
  const ValueId real = added(r, *ir::find_op(K::cast), {&sums, 1}, {&to, 1});
  const float x_scale = static_cast<float>(eval::load_f(constant_data(g, operand(g, *p.x, 1)), 0));
  std::vector<float> scale;
  for (const double w_scale : p.w_scale) scale.push_back(x_scale * static_cast<float>(w_scale));
  const ValueId factor = r.to().add_constant(ir::DType::F32, scale.size() == 1 ? ir::Shape{} : ir::Shape{n}, scale.data(),
                                             scale.size() * sizeof(float));
  const ValueId operands[] = {real, factor};
  return added(r, *ir::find_op(K::mul), {operands, 2}, {});
}

}  // namespace

// quantize(add(dequantize(a), dequantize(b))), a Relu or Clip of the sum between them: a
// residual connection, as one quantized_add over the integers (the same f32 steps in one pass).
struct Sum {
  const ir::Node *a = nullptr, *b = nullptr;  // the dequantizes
  NodeId add = kNone;
  Bounds bounds;
};

std::optional<Sum> sum_at(const Graph& g, const ir::Node& q, const std::vector<uint32_t>& uses) {
  Sum m;
  const ir::Node* add = quantized_result(g, q, K::add, uses, m.bounds, m.add);
  if (!add) return std::nullopt;
  m.a = made_by(g, operand(g, *add, 0), K::dequantize_linear);
  m.b = made_by(g, operand(g, *add, 1), K::dequantize_linear);
  if (!m.a || !m.b) return std::nullopt;
  return m;
}

std::unique_ptr<Graph> recognize_quantized_ops(const Graph& g) {
  const std::vector<uint32_t> uses = use_counts(g);
  std::vector<std::optional<Match>> at(g.nodes.size());
  std::vector<bool> absorbed(g.nodes.size(), false);
  for (NodeId id = 0; id < g.nodes.size(); ++id) {
    if (g.nodes[id].op->kind != K::quantize_linear) continue;
    std::optional<Match> m = match_at(g, g.nodes[id], uses);
    if (!m || (!m->bias.empty() && bias_as_sums(*m, eval::load_f(constant_data(g, operand(g, *m->x, 1)), 0)).empty())) continue;
    absorbed[m->conv] = true;
    if (m->bounds.clip != kNone) absorbed[m->bounds.clip] = true;
    if (uses[m->w->first_output] == 1) absorbed[g.values[m->w->first_output].producer] = true;
    at[id] = std::move(m);
  }
  std::vector<std::optional<Product>> products(g.nodes.size());
  for (NodeId id = 0; id < g.nodes.size(); ++id) {
    if (!(products[id] = product_at(g, g.nodes[id]))) continue;
    for (const ir::Node* d : {products[id]->x, products[id]->w})
      if (uses[d->first_output] == 1) absorbed[g.values[d->first_output].producer] = true;
  }
  std::vector<const ir::Node*> pools(g.nodes.size(), nullptr);
  std::vector<std::optional<Sum>> sums(g.nodes.size());
  for (NodeId id = 0; id < g.nodes.size(); ++id) {
    if (g.nodes[id].op->kind != K::quantize_linear || at[id]) continue;
    if ((pools[id] = pool_of_integers(g, g.nodes[id], uses))) {
      absorbed[g.values[pools[id]->first_output].producer] = true;
    } else if ((sums[id] = sum_at(g, g.nodes[id], uses))) {
      absorbed[sums[id]->add] = true;
      if (sums[id]->bounds.clip != kNone) absorbed[sums[id]->bounds.clip] = true;
      for (const ir::Node* d : {sums[id]->a, sums[id]->b})  // a dequantize others read stays
        if (uses[d->first_output] == 1) absorbed[g.values[d->first_output].producer] = true;
    }
  }
  return run_pass(g, [&](ir::Replay& r, NodeId id) {
    if (absorbed[id]) return true;  // its one reader is the quantized op
    const ir::Node& n = g.nodes[id];
    if (products[id]) {
      r.set(n.first_output, integer_product(r, g, *products[id]));
      return true;
    }
    if (const ir::Node* pool = pools[id]) {
      const ir::Node& d = *producer(g, operand(g, *pool, 0));
      const ValueId x = r.get(operand(g, d, 0));
      const std::vector<ir::AttrArg> attrs = attrs_of(g, *pool);
      r.set(n.first_output, added(r, *pool->op, {&x, 1}, {attrs.data(), attrs.size()}));
      return true;
    }
    if (const std::optional<Sum>& m = sums[id]) {
      const ValueId in[] = {r.get(operand(g, *m->a, 0)), r.get(operand(g, *m->a, 1)), r.get(operand(g, *m->a, 2)),
                            r.get(operand(g, *m->b, 0)), r.get(operand(g, *m->b, 1)), r.get(operand(g, *m->b, 2)),
                            r.get(operand(g, n, 1)),     r.get(operand(g, n, 2))};
      const ir::AttrArg attrs[] = {ir::AttrArg::of_float(m->bounds.min), ir::AttrArg::of_float(m->bounds.max)};
      r.set(n.first_output, added(r, *ir::find_op(K::quantized_add), {in, 8}, {attrs, 2}));
      return true;
    }
    // at any size: dequantized weights are what the QDQ graph multiplies in f32 where nothing
    // quantized takes them
    if (!at[id]) return n.op->kind == K::dequantize_linear && fold_node(r, g, id, std::numeric_limits<int64_t>::max());
    const Match& m = *at[id];
    const ir::Node& conv = g.nodes[m.conv];
    const ValueId w = operand(g, *m.w, 0);
    const int64_t channels = g.shape(w)[0];
    const ir::DType w_type = g.values[w].dtype;
    // Per-channel parameters as [O], the form quantized_conv2d takes; one value stays as it is.
    auto parameter = [&](const std::vector<double>& values, ir::DType dtype, ValueId original) {
      if (values.size() == 1) return r.get(original);
      eval::HostTensor t(dtype, ir::Shape{channels});
      for (int64_t o = 0; o < channels; ++o) eval::store_f(t, o, values[static_cast<size_t>(o)]);
      return r.to().add_constant(dtype, t.shape, t.bytes.data(), t.bytes.size());
    };
    std::vector<ValueId> in = {r.get(operand(g, *m.x, 0)), r.get(operand(g, *m.x, 1)), r.get(operand(g, *m.x, 2)), r.get(w),
                               parameter(m.w_scale, ir::DType::F32, operand(g, *m.w, 1)),
                               parameter(m.w_zero_point, w_type, operand(g, *m.w, 2)), r.get(operand(g, n, 1)),
                               r.get(operand(g, n, 2)), kNone};
    if (!m.bias.empty()) {
      const std::vector<int32_t> sums = bias_as_sums(m, eval::load_f(constant_data(g, operand(g, *m.x, 1)), 0));
      in[8] = r.to().add_constant(ir::DType::I32, ir::Shape{channels}, sums.data(), sums.size() * sizeof(int32_t));
    }
    std::vector<ir::AttrArg> attrs = attrs_of(g, conv);
    attrs.push_back(ir::AttrArg::of_float(m.bounds.min));
    attrs.push_back(ir::AttrArg::of_float(m.bounds.max));
    r.set(n.first_output, added(r, *ir::find_op(K::quantized_conv2d), {in.data(), in.size()}, {attrs.data(), attrs.size()}));
    return true;
  });
}

}  // namespace esg::passes
