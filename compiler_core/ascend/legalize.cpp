// The Ascend backend's legalizations (legalize.hpp): rewrites of what its generated kernels and
// CANN's operator library cannot take into what they can, built on the same helpers as the
// target-independent passes (passes/rewrite.hpp).
#include "ascend/legalize.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ascend/aclnn_call.hpp"
#include "ascend/kernel_source.hpp"
#include "ascend/row_kernel_source.hpp"
#include "eval/evaluate.hpp"
#include "eval/quantized.hpp"
#include "ir/half.hpp"
#include "ir/op_attrs.gen.hpp"
#include "ir/replay.hpp"
#include "passes/passes.hpp"
#include "passes/rewrite.hpp"

namespace esg::ascend {
namespace {

using ir::Graph;
using ir::kNone;
using ir::NodeId;
using ir::Replay;
using ir::ValueId;
using passes::added;
using passes::attrs_of;
using passes::constant_data;
using passes::producer;
using passes::run_pass;

using K = ir::OpKind;

ValueId cast_to(Replay& r, ValueId v, ir::DType dtype) {
  const ir::AttrArg to = ir::AttrArg::of_dtype(dtype);
  return added(r, *ir::find_op(K::cast), {&v, 1}, {&to, 1});
}

ValueId binary(Replay& r, K op, ValueId a, ValueId b) {
  const ValueId in[] = {a, b};
  return added(r, *ir::find_op(op), {in, 2}, {});
}

// A zero point as f32: a constant converted here, else cast on the device; kNone for a constant 0.
ValueId zero_point_as_f32(Replay& r, const Graph& g, ValueId zp) {
  const eval::TensorRef t = constant_data(g, zp);
  if (!t.bytes) return cast_to(r, r.get(zp), ir::DType::F32);
  std::vector<float> values(static_cast<size_t>(t.size()));
  bool zero = true;
  for (int64_t i = 0; i < t.size(); ++i) zero = zero && (values[static_cast<size_t>(i)] = static_cast<float>(eval::load_f(t, i))) == 0;
  return zero ? kNone : r.to().add_constant(ir::DType::F32, t.shape, values.data(), values.size() * sizeof(float));
}

// (f32(x) - f32(zero_point)) · scale: dequantize_linear's arithmetic, exact in f32 as its own.
ValueId dequantized(Replay& r, const Graph& g, ValueId x, ValueId scale, ValueId zp) {
  ValueId real = cast_to(r, r.get(x), ir::DType::F32);
  if (const ValueId z = zero_point_as_f32(r, g, zp); z != kNone) real = binary(r, K::sub, real, z);
  return binary(r, K::mul, real, r.get(scale));
}

// saturate(round(real / scale) + zero_point) in f32, then cast to the zero point's type:
// quantize_linear's arithmetic, the saturation a clip to the type's range (so the cast is exact).
ValueId quantized(Replay& r, const Graph& g, ValueId real, ValueId scale, ValueId zp) {
  const ir::DType type = g.values[zp].dtype;
  const ValueId ratio = binary(r, K::div, real, r.get(scale));
  ValueId q = added(r, *ir::find_op(K::round), {&ratio, 1}, {});
  if (const ValueId z = zero_point_as_f32(r, g, zp); z != kNone) q = binary(r, K::add, q, z);
  const bool u8 = type == ir::DType::U8;
  const ir::AttrArg range[] = {ir::AttrArg::of_float(u8 ? 0 : -128), ir::AttrArg::of_float(u8 ? 255 : 127)};
  q = added(r, *ir::find_op(K::clip), {&q, 1}, {range, 2});
  return cast_to(r, q, type);
}

bool eight_bits(ir::DType t) { return t == ir::DType::U8 || t == ir::DType::I8; }

}  // namespace

std::unique_ptr<Graph> quantized_as_floats(const Graph& g) {
  return run_pass(g, [&](Replay& r, NodeId id) {
    const ir::Node& n = g.nodes[id];
    if (n.region != 0 || n.num_deps) return false;
    auto in = [&](uint32_t i) { return g.operands[n.first_input + i]; };
    switch (n.op->kind) {
      case K::dequantize_linear: r.set(n.first_output, dequantized(r, g, in(0), in(1), in(2))); return true;
      case K::quantize_linear: r.set(n.first_output, quantized(r, g, r.get(in(0)), in(1), in(2))); return true;
      case K::quantized_add: {
        ValueId sum = binary(r, K::add, dequantized(r, g, in(0), in(1), in(2)), dequantized(r, g, in(3), in(4), in(5)));
        const ir::QuantizedAddAttrs a(g, n);
        if (std::isfinite(a.min) || std::isfinite(a.max)) {
          const ir::AttrArg bounds[] = {ir::AttrArg::of_float(a.min), ir::AttrArg::of_float(a.max)};
          sum = added(r, *ir::find_op(K::clip), {&sum, 1}, {bounds, 2});
        }
        r.set(n.first_output, quantized(r, g, sum, in(6), in(7)));
        return true;
      }
      case K::max_pool2d: {  // every 8-bit integer is an f16, and a maximum picks one of them
        const ir::DType type = g.values[in(0)].dtype;
        if (!eight_bits(type)) return false;
        const ValueId x = cast_to(r, r.get(in(0)), ir::DType::F16);
        const std::vector<ir::AttrArg> attrs = attrs_of(g, n);
        r.set(n.first_output, cast_to(r, added(r, *n.op, {&x, 1}, {attrs.data(), attrs.size()}), type));
        return true;
      }
      default: return false;
    }
  });
}

namespace {

// u8 values less 128, as int8: exact through f32 (aclnnCast on each side of one kernel).
ValueId shifted_into_int8(Replay& r, ValueId real) {
  const float half = 128;
  return cast_to(r, binary(r, K::sub, real, r.to().add_constant(ir::DType::F32, ir::Shape{}, &half, sizeof half)), ir::DType::I8);
}

ValueId int8_zero(Replay& r) {
  const int8_t zero = 0;
  return r.to().add_constant(ir::DType::I8, ir::Shape{}, &zero, sizeof zero);
}

// (a - zp) · w = (a - 128) · w + (128 - zp) · the sums of w's columns.
bool shift_product(Replay& r, const Graph& g, const ir::Node& n) {
  const ValueId a = g.operands[n.first_input], b = g.operands[n.first_input + 1];
  const ValueId a_zp = g.operands[n.first_input + 2], b_zp = g.operands[n.first_input + 3];
  if (g.values[a].dtype != ir::DType::U8 || g.values[b].dtype != ir::DType::I8 || g.shape(a_zp).num_elements() != 1 ||
      !constant_data(g, b).bytes || g.shape(b).rank() != 2 || !zero_constant(g, b_zp))
    return false;
  const ValueId in[] = {shifted_into_int8(r, cast_to(r, r.get(a), ir::DType::F32)), r.get(b), int8_zero(r), int8_zero(r)};
  const ValueId sums = added(r, *n.op, {in, 4}, {});
  const ir::Shape ws = g.shape(b);
  const int8_t* w = constant_data(g, b).data<int8_t>();
  std::vector<int32_t> columns(static_cast<size_t>(ws[1]), 0);
  for (int64_t k = 0; k < ws[0]; ++k)
    for (int64_t j = 0; j < ws[1]; ++j) columns[static_cast<size_t>(j)] += w[k * ws[1] + j];
  const int32_t center = 128;
  if (constant_data(g, a_zp).bytes) {  // the whole term folded
    for (int32_t& c : columns) c *= center - static_cast<int32_t>(eval::load_i(constant_data(g, a_zp), 0));
    const ValueId term = r.to().add_constant(ir::DType::I32, ir::Shape{ws[1]}, columns.data(), columns.size() * sizeof(int32_t));
    r.set(n.first_output, binary(r, K::add, sums, term));
    return true;
  }
  const ValueId column_sums = r.to().add_constant(ir::DType::I32, ir::Shape{ws[1]}, columns.data(), columns.size() * sizeof(int32_t));
  const ValueId offset =
      binary(r, K::sub, r.to().add_constant(ir::DType::I32, ir::Shape{}, &center, sizeof center), cast_to(r, r.get(a_zp), ir::DType::I32));
  r.set(n.first_output, binary(r, K::add, sums, binary(r, K::mul, offset, column_sums)));
  return true;
}

// The image padded explicitly with its zero point (the real 0), so every window sees whole
// values, then shifted: (x - zp) ⋆ w = (x - 128) ⋆ w + (128 - zp) · the sum of each filter,
// which joins the bias.
bool shift_convolution(Replay& r, const Graph& g, const ir::Node& n) {
  const auto in = g.inputs(n);
  const ir::QuantizedConv2dAttrs a(g, n);
  if (g.values[in[0]].dtype != ir::DType::U8 || g.shape(in[2]).num_elements() != 1 || !constant_data(g, in[2]).bytes ||
      g.values[in[3]].dtype != ir::DType::I8 || !constant_data(g, in[3]).bytes || !zero_constant(g, in[5]) || a.groups != 1 ||
      (in.size() > 8 && in[8] != kNone && !constant_data(g, in[8]).bytes))
    return false;
  const int32_t zero_point = static_cast<int32_t>(eval::load_i(constant_data(g, in[2]), 0));
  ValueId image = cast_to(r, r.get(in[0]), ir::DType::F32);
  const ir::Span<int64_t> p = a.pads;  // top, left, bottom, right
  if (std::any_of(p.begin(), p.end(), [](int64_t v) { return v != 0; })) {
    const ir::OpSchema& pad = *ir::find_op(K::pad);
    const int64_t pads[8] = {0, 0, p[0], p[1], 0, 0, p[2], p[3]};
    std::vector<ir::AttrArg> attrs(pad.attrs.size());
    attrs[ir::PadAttrs::Index::pads] = ir::AttrArg::of_ints(pads, 8);
    attrs[ir::PadAttrs::Index::value] = ir::AttrArg::of_float(zero_point);
    image = added(r, pad, {&image, 1}, {attrs.data(), attrs.size()});
  }
  const ir::Shape ws = g.shape(in[3]);
  const int64_t per_filter = ws.num_elements() / ws[0];
  const int8_t* w = constant_data(g, in[3]).data<int8_t>();
  const int32_t* bias = in.size() > 8 && in[8] != kNone ? constant_data(g, in[8]).data<int32_t>() : nullptr;
  std::vector<int32_t> sums(static_cast<size_t>(ws[0]));
  for (int64_t o = 0; o < ws[0]; ++o) {
    int32_t filter = 0;
    for (int64_t i = 0; i < per_filter; ++i) filter += w[o * per_filter + i];
    sums[static_cast<size_t>(o)] = (bias ? bias[o] : 0) + (128 - zero_point) * filter;
  }
  std::vector<ValueId> operands = {shifted_into_int8(r, image), r.get(in[1]), int8_zero(r)};
  for (size_t i = 3; i < 8; ++i) operands.push_back(r.get(in[i]));
  operands.push_back(r.to().add_constant(ir::DType::I32, ir::Shape{ws[0]}, sums.data(), sums.size() * sizeof(int32_t)));
  std::vector<ir::AttrArg> attrs = attrs_of(g, n);
  const int64_t none[4] = {0, 0, 0, 0};
  attrs[ir::QuantizedConv2dAttrs::Index::pads] = ir::AttrArg::of_ints(none, 4);
  r.set(n.first_output, added(r, *n.op, {operands.data(), operands.size()}, {attrs.data(), attrs.size()}));
  return true;
}

}  // namespace

std::unique_ptr<Graph> signed_activations(const Graph& g) {
  return run_pass(g, [&](Replay& r, NodeId id) {
    const ir::Node& n = g.nodes[id];
    if (n.region != 0 || n.num_deps) return false;
    if (n.op->kind == K::matmul_integer) return shift_product(r, g, n);
    return n.op->kind == K::quantized_conv2d && shift_convolution(r, g, n);
  });
}

std::unique_ptr<Graph> requantize_after_convolutions(const Graph& g,
                                                     const std::function<bool(const Graph&, const ir::Node&)>& takes) {
  const ir::OpSchema& conv = *ir::find_op(K::quantized_conv2d);
  using At = ir::QuantizedConv2dAttrs::Index;
  return run_pass(g, [&](Replay& r, NodeId id) {
    const ir::Node& n = g.nodes[id];
    const ir::DType type = g.values[n.first_output].dtype;
    if (n.region != 0 || n.num_deps || n.op->kind != K::quantized_conv2d || !eight_bits(type) || !takes(g, n)) return false;
    const auto in = g.inputs(n);
    const ir::QuantizedConv2dAttrs a(g, n);
    const eval::Requantization q = eval::requantization(constant_data(g, in[1]), constant_data(g, in[4]), constant_data(g, in[6]),
                                                        constant_data(g, in[7]), a.min, a.max);
    // The convolution with an f16 result in the output's units, its zero point added, unbounded.
    const uint16_t zero_point = ir::float_to_f16(static_cast<float>(q.zero_point));
    std::vector<ValueId> operands;
    for (size_t i = 0; i < in.size(); ++i)
      operands.push_back(i == 7 ? r.to().add_constant(ir::DType::F16, ir::Shape{}, &zero_point, sizeof zero_point)
                                : in[i] == kNone ? kNone : r.get(in[i]));
    std::vector<ir::AttrArg> attrs = attrs_of(g, n);
    attrs[At::min] = ir::AttrArg::of_float(-INFINITY);
    attrs[At::max] = ir::AttrArg::of_float(INFINITY);
    const ValueId real = cast_to(r, added(r, conv, {operands.data(), operands.size()}, {attrs.data(), attrs.size()}), ir::DType::F32);
    // Then what the requantization does after scaling: round half to even, clamp to the
    // quantized bounds (the type's range, narrowed by a folded Relu or Clip), the 8-bit type.
    ValueId rounded = added(r, *ir::find_op(K::round), {&real, 1}, {});
    const ir::AttrArg range[] = {ir::AttrArg::of_float(static_cast<double>(q.low)), ir::AttrArg::of_float(static_cast<double>(q.high))};
    rounded = added(r, *ir::find_op(K::clip), {&rounded, 1}, {range, 2});
    r.set(n.first_output, cast_to(r, rounded, type));
    return true;
  });
}

std::unique_ptr<Graph> split_into_slices(const Graph& g) {
  const ir::OpSchema* slice = ir::find_op(K::slice);
  using At = ir::SliceAttrs::Index;
  return run_pass(g, [&](Replay& r, NodeId id) {
    const ir::Node& n = g.nodes[id];
    if (n.region != 0 || n.num_deps || n.op->kind != K::split) return false;
    const ValueId x = r.get(g.operands[n.first_input]);
    const size_t axis = ir::SplitAttrs(g, n).axis;
    int64_t at = 0;
    for (uint32_t k = 0; k < n.num_outputs; ++k) {
      const int64_t size = g.shape(n.first_output + k)[axis];
      const int64_t starts[] = {at}, ends[] = {at + size}, axes[] = {static_cast<int64_t>(axis)};
      std::vector<ir::AttrArg> attrs(slice->attrs.size());
      attrs[At::starts] = ir::AttrArg::of_ints(starts, 1);
      attrs[At::ends] = ir::AttrArg::of_ints(ends, 1);
      attrs[At::axes] = ir::AttrArg::of_ints(axes, 1);
      const ValueId in[] = {x};
      r.set(n.first_output + k, added(r, *slice, {in, 1}, {attrs.data(), attrs.size()}));
      at += size;
    }
    return true;
  });
}

std::unique_ptr<Graph> split_scaled_softmax(const Graph& g, const std::function<bool(const Graph&, const ir::Node&)>& keep) {
  const ir::OpSchema *mul = ir::find_op(K::mul), *add = ir::find_op(K::add);
  return run_pass(g, [&](Replay& r, NodeId id) {
    const ir::Node& n = g.nodes[id];
    if (n.region != 0 || n.num_deps || n.op->kind != K::softmax || (keep && keep(g, n))) return false;
    const ir::SoftmaxAttrs softmax(g, n);
    const double scale = softmax.scale;
    const ValueId mask = n.num_inputs > 1 ? g.operands[n.first_input + 1] : kNone;
    if (scale == 1.0 && mask == kNone) return false;
    ValueId x = r.get(g.operands[n.first_input]);
    const ir::DType dtype = r.to().graph().values[x].dtype;
    if (scale != 1.0) {
      // The scale as a constant of x's own dtype (mul takes one dtype).
      const float f = static_cast<float>(scale);
      const uint16_t half = dtype == ir::DType::BF16 ? ir::float_to_bf16(f) : ir::float_to_f16(f);
      const ValueId c = dtype == ir::DType::F16 || dtype == ir::DType::BF16 ? r.to().add_constant(dtype, ir::Shape{}, &half, sizeof half)
                        : dtype == ir::DType::F64                           ? r.to().add_constant(dtype, ir::Shape{}, &scale, sizeof scale)
                                                                            : r.to().add_constant(ir::DType::F32, ir::Shape{}, &f, sizeof f);
      const ValueId in[] = {x, c};
      x = added(r, *mul, {in, 2}, {});
    }
    if (mask != kNone) {
      const ValueId in[] = {x, r.get(mask)};
      x = added(r, *add, {in, 2}, {});
    }
    std::vector<ir::AttrArg> attrs(n.op->attrs.size());  // the defaults (scale 1) but the axis
    attrs[ir::SoftmaxAttrs::Index::axis] = ir::AttrArg::of_int(static_cast<int64_t>(softmax.axis));
    const ValueId in[] = {x};
    r.set(n.first_output, added(r, *n.op, {in, 1}, {attrs.data(), attrs.size()}));
    return true;
  });
}

std::unique_ptr<Graph> pad_asymmetric_convolutions(const Graph& g) {
  const ir::OpSchema* pad = ir::find_op(K::pad);
  return run_pass(g, [&](Replay& r, NodeId id) {
    const ir::Node& n = g.nodes[id];
    if (n.region != 0 || n.num_deps || n.op->kind != K::conv2d) return false;
    const ir::Span<int64_t> p = ir::Conv2dAttrs(g, n).pads;  // top, left, bottom, right
    if (p[0] == p[2] && p[1] == p[3]) return false;
    // The convolution keeps the padding both sides share; the rest is an explicit pad.
    const int64_t top = std::min(p[0], p[2]), left = std::min(p[1], p[3]);
    const int64_t extra[8] = {0, 0, p[0] - top, p[1] - left, 0, 0, p[2] - top, p[3] - left};
    std::vector<ir::AttrArg> pad_attrs(pad->attrs.size());  // constant mode, value 0
    pad_attrs[ir::PadAttrs::Index::pads] = ir::AttrArg::of_ints(extra, 8);
    const ValueId image[] = {r.get(g.operands[n.first_input])};
    std::vector<ValueId> in = {added(r, *pad, {image, 1}, {pad_attrs.data(), pad_attrs.size()})};
    for (uint32_t i = 1; i < n.num_inputs; ++i) {
      const ValueId v = g.operands[n.first_input + i];
      in.push_back(v == kNone ? kNone : r.get(v));
    }
    const int64_t shared[4] = {top, left, top, left};
    std::vector<ir::AttrArg> attrs = attrs_of(g, n);
    attrs[ir::Conv2dAttrs::Index::pads] = ir::AttrArg::of_ints(shared, 4);
    r.set(n.first_output, added(r, *n.op, {in.data(), in.size()}, {attrs.data(), attrs.size()}));
    return true;
  });
}

std::unique_ptr<Graph> pad_average_pools(const Graph& g, const std::function<bool(const Graph&, const ir::Node&)>& takes) {
  const ir::OpSchema *pad = ir::find_op(K::pad), *mul = ir::find_op(K::mul);
  using At = ir::AvgPool2dAttrs::Index;
  return run_pass(g, [&](Replay& r, NodeId id) {
    const ir::Node& n = g.nodes[id];
    if (n.region != 0 || n.num_deps || n.op->kind != K::avg_pool2d || takes(g, n)) return false;
    const ValueId x = g.operands[n.first_input];
    const ir::AvgPool2dAttrs pool(g, n);
    const ir::Span<int64_t> p = pool.pads, k = pool.kernel, s = pool.strides;
    const ir::Shape& in = g.shape(x);
    const ir::Shape& out = g.shape(n.first_output);
    if (p[0] + p[1] + p[2] + p[3] == 0) return false;
    // Every window inside the padded input: then a pool without padding (and without ceil mode)
    // has the same windows.
    for (size_t a = 0; a < 2; ++a)
      if ((out[2 + a] - 1) * s[a] + k[a] > in[2 + a] + p[a] + p[a + 2]) return false;
    const int64_t pads[8] = {0, 0, p[0], p[1], 0, 0, p[2], p[3]};
    std::vector<ir::AttrArg> pad_attrs(pad->attrs.size());  // constant mode, value 0
    pad_attrs[ir::PadAttrs::Index::pads] = ir::AttrArg::of_ints(pads, 8);
    const ValueId image[] = {r.get(x)};
    const ValueId padded[] = {added(r, *pad, {image, 1}, {pad_attrs.data(), pad_attrs.size()})};
    const int64_t none[4] = {0, 0, 0, 0};
    std::vector<ir::AttrArg> attrs = attrs_of(g, n);
    attrs[At::pads] = ir::AttrArg::of_ints(none, 4);
    attrs[At::ceil_mode] = ir::AttrArg::of_bool(false);
    const ValueId pooled = added(r, *n.op, {padded, 1}, {attrs.data(), attrs.size()});
    // The factor per output position: the window's area over its elements inside the input.
    auto inside = [&](size_t a, int64_t o) {
      const int64_t begin = o * s[a] - p[a];
      return std::min(begin + k[a], in[2 + a]) - std::max<int64_t>(begin, 0);
    };
    const ir::DType dtype = g.values[x].dtype;
    eval::HostTensor factor(dtype, ir::Shape{out[2], out[3]});
    for (int64_t h = 0; h < out[2]; ++h)
      for (int64_t w = 0; w < out[3]; ++w)
        eval::store_f(factor, h * out[3] + w, static_cast<double>(k[0] * k[1]) / static_cast<double>(inside(0, h) * inside(1, w)));
    const ValueId operands[] = {pooled, r.to().add_constant(dtype, factor.shape, factor.bytes.data(), factor.bytes.size())};
    r.set(n.first_output, added(r, *mul, {operands, 2}, {}));
    return true;
  });
}

std::unique_ptr<Graph> split_products_over_axes(const Graph& g) {
  const ir::OpSchema* reshape = ir::find_op(K::reshape);
  using At = ir::ReduceProdAttrs::Index;
  return run_pass(g, [&](Replay& r, NodeId id) {
    const ir::Node& n = g.nodes[id];
    if (n.region != 0 || n.num_deps || n.op->kind != K::reduce_prod) return false;
    const ValueId x = g.operands[n.first_input];
    const size_t rank = g.shape(x).rank();
    const ir::ReduceProdAttrs product(g, n);
    const std::vector<size_t>& axes = product.axes;
    const ir::Shape out = g.shape(n.first_output);
    // Some but not all axes, and no empty result dims (reshape's 0 copies an input dim).
    if (axes.size() < 2 || axes.size() >= rank || std::find(out.begin(), out.end(), 0) != out.end()) return false;
    ValueId v = r.get(x);
    for (size_t axis : axes) {  // one axis at a time, keeping it as 1
      const int64_t a = static_cast<int64_t>(axis);
      std::vector<ir::AttrArg> attrs(n.op->attrs.size());
      attrs[At::axes] = ir::AttrArg::of_ints(&a, 1);
      attrs[At::keepdims] = ir::AttrArg::of_bool(true);
      const ValueId in[] = {v};
      v = added(r, *n.op, {in, 1}, {attrs.data(), attrs.size()});
    }
    if (!product.keepdims) {
      const std::vector<int64_t> dims(out.begin(), out.end());
      ir::AttrArg a = ir::AttrArg::of_ints(dims.data(), dims.size());
      const ValueId in[] = {v};
      v = added(r, *reshape, {in, 1}, {&a, 1});
    }
    r.set(n.first_output, v);
    return true;
  });
}

std::unique_ptr<Graph> wrap_negative_indices(const Graph& g) {
  const ir::OpSchema *less = ir::find_op(K::less), *add = ir::find_op(K::add), *where = ir::find_op(K::where);
  return run_pass(g, [&](Replay& r, NodeId id) {
    const ir::Node& n = g.nodes[id];
    const K kind = n.op->kind;
    const bool nd = kind == K::scatter_nd;
    if (n.region != 0 || n.num_deps || !(kind == K::gather || kind == K::scatter_elements || nd)) return false;
    const ValueId x = g.operands[n.first_input], indices = g.operands[n.first_input + 1];
    const ir::DType type = g.values[indices].dtype;
    const ir::Shape& xs = g.shape(x);
    const ir::Shape& is = g.shape(indices);
    // The axis length each index counts from: one axis, or for scatter_nd's index tuples (the
    // last axis of the indices) one per position in the tuple.
    std::vector<int64_t> bound;
    if (nd) {
      bound.assign(xs.begin(), xs.begin() + (is.rank() ? is[is.rank() - 1] : 0));
    } else {
      bound = {xs[kind == K::gather ? ir::GatherAttrs(g, n).axis : ir::ScatterElementsAttrs(g, n).axis]};
    }
    if (bound.empty()) return false;
    // Indices an arg-reduction or top-k made are never negative.
    if (const ir::Node* p = producer(g, indices);
        p && (p->op->kind == K::argmax || p->op->kind == K::argmin || (p->op->kind == K::top_k && g.values[indices].index == 1)))
      return false;
    ValueId wrapped;
    if (const ir::Node* p = producer(g, indices); p && p->blob != kNone) {
      eval::TensorRef t{type, is, const_cast<uint8_t*>(g.blobs[p->blob]->data())};
      bool negative = false;
      for (int64_t i = 0; i < t.size() && !negative; ++i) negative = eval::load_i(t, i) < 0;
      if (!negative) return false;
      std::vector<uint8_t> bytes(g.blobs[p->blob]->begin(), g.blobs[p->blob]->end());
      eval::TensorRef out{type, is, bytes.data()};
      for (int64_t i = 0; i < t.size(); ++i)
        if (const int64_t v = eval::load_i(t, i); v < 0) eval::store_i(out, i, v + bound[static_cast<size_t>(i) % bound.size()]);
      wrapped = r.to().add_constant(type, is, bytes.data(), bytes.size());
    } else {
      auto constant = [&](const std::vector<int64_t>& values, ir::Shape shape) {
        eval::HostTensor c(type, shape);
        for (size_t i = 0; i < values.size(); ++i) eval::store_i(c, static_cast<int64_t>(i), values[i]);
        return r.to().add_constant(type, c.shape, c.bytes.data(), c.bytes.size());
      };
      const ValueId i = r.get(indices);
      const ValueId below[] = {i, constant({0}, ir::Shape{})};
      const ValueId shifted[] = {i, nd ? constant(bound, ir::Shape{static_cast<int64_t>(bound.size())}) : constant(bound, ir::Shape{})};
      const ValueId pick[] = {added(r, *less, {below, 2}, {}), added(r, *add, {shifted, 2}, {}), i};
      wrapped = added(r, *where, {pick, 3}, {});
    }
    std::vector<ValueId> in;
    for (uint32_t k = 0; k < n.num_inputs; ++k) in.push_back(k == 1 ? wrapped : r.get(g.operands[n.first_input + k]));
    const std::vector<ir::AttrArg> attrs = attrs_of(g, n);
    r.set(n.first_output, added(r, *n.op, {in.data(), in.size()}, {attrs.data(), attrs.size()}));
    return true;
  });
}

std::unique_ptr<Graph> materialize_broadcasts(const Graph& g, const std::function<bool(const ir::Graph&, const ir::Node&)>& computes,
                                              const std::function<bool(const ir::Shape&, ir::DType, const ir::Shape&)>& reads) {
  const ir::OpSchema* expand = ir::find_op(K::expand);
  return run_pass(g, [&](Replay& r, NodeId id) {
    const ir::Node& n = g.nodes[id];
    if (n.region != 0 || n.num_bodies || n.num_deps || !n.op->elementwise || n.num_outputs != 1 || !computes(g, n)) return false;
    const ir::Shape out = g.shape(n.first_output);
    // The node is copied with the operands it cannot read mapped to their expansion, and the
    // mapping restored for the operands' other readers.
    std::vector<std::pair<ValueId, ValueId>> restore;
    for (uint32_t i = 0; i < n.num_inputs; ++i) {
      const ValueId v = g.operands[n.first_input + i];
      if (v == kNone || g.shape(v) == out || reads(g.shape(v), g.values[v].dtype, out) ||
          std::any_of(restore.begin(), restore.end(), [&](const auto& p) { return p.first == v; }))
        continue;
      const std::vector<int64_t> dims(out.begin(), out.end());
      ir::AttrArg a = ir::AttrArg::of_ints(dims.data(), dims.size());
      const ValueId operand[] = {r.get(v)};
      restore.emplace_back(v, operand[0]);
      r.set(v, added(r, *expand, {operand, 1}, {&a, 1}));
    }
    if (restore.empty()) return false;
    r.copy(id);
    for (const auto& [v, was] : restore) r.set(v, was);
    return true;
  });
}

std::unique_ptr<Graph> legalize(const Graph& g) {
  // The softmax split first: its mask may be one of the broadcasts to expand. Softmaxes a row
  // kernel computes keep their scale and mask (it reads the mask's rows where they repeat).
  const auto library_takes = [](const Graph& graph, const ir::Node& n) { return AclnnCall::unsupported(graph, n).empty(); };
  // Attention as its products and softmax first: CANN's fused attention (aclnnFlashAttentionScore)
  // is not wired yet, and the pieces feed the legalizations below.
  std::unique_ptr<Graph> legal = passes::decompose_attention(g);
  legal = quantized_as_floats(*legal);
  legal = signed_activations(*legal);
  legal = requantize_after_convolutions(*legal, library_takes);
  legal = pad_average_pools(*pad_asymmetric_convolutions(*legal), library_takes);
  const auto sliced = split_into_slices(*split_products_over_axes(*wrap_negative_indices(*legal)));
  const auto row_kernel_takes = [](const Graph& graph, const ir::Node& n) { return row_kernel_refusal(graph, n).empty(); };
  return materialize_broadcasts(*split_scaled_softmax(*sliced, row_kernel_takes), kernel_computes, kernel_reads_broadcast);
}

}  // namespace esg::ascend
