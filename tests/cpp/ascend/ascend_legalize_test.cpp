// The Ascend backend's legalizations (ascend/legalize.hpp), each on its own: it rewrites what the
// backend's kernels and CANN's library cannot take, leaves the rest, and the graph computes the
// same values afterwards (checked with the reference evaluator). On the host only: no device,
// simulated or not, is involved.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "ascend/legalize.hpp"
#include "ir/builder.hpp"
#include "ir/op_attrs.gen.hpp"
#include "ir_build.hpp"
#include "ir/ops.gen.hpp"
#include "rewrite_check.hpp"

using namespace esg;
using ir::ValueId;
using test::close_values;
using test::count;
using test::node;
using test::same_values;

TEST_CASE("broadcasts a backend does not read get an expand; other readers keep the operand") {
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{4, 3});
  const ValueId column = b.add_input("column", ir::DType::F32, ir::Shape{4, 1});
  const ValueId row = b.add_input("row", ir::DType::F32, ir::Shape{3});
  // The column twice in one op (expanded once), read again by a reduction (not elementwise).
  const ValueId y = node(b, ir::ops::add, {node(b, ir::ops::mul, {x, column}), row});
  const ValueId z = node(b, ir::ops::mul, {column, column});
  const ValueId outs[] = {y, z, node(b, ir::ops::reduce_sum, {column})};
  const auto g = b.finish({outs, 3});
  // Reads rows (trailing dims) in place, not columns.
  const auto rows_only = [](const ir::Shape& s, ir::DType, const ir::Shape& out) { return s.rank() == 1 && s[0] == out[out.rank() - 1]; };
  const auto every_op = [](const ir::Graph&, const ir::Node&) { return true; };
  const auto out = ascend::materialize_broadcasts(*g, every_op, rows_only);
  CHECK(count(*out, "expand") == 1);  // mul(x, column) only: z's operands are its own shape
  same_values(*g, *out);
  CHECK(count(*ascend::materialize_broadcasts(*g, every_op, [](const ir::Shape&, ir::DType, const ir::Shape&) { return true; }), "expand") == 0);
  // Ops the backend's kernels do not run (its library broadcasts for them) are left alone.
  const auto no_mul = [](const ir::Graph&, const ir::Node& n) { return std::strcmp(n.op->name, "mul") != 0; };
  CHECK(count(*ascend::materialize_broadcasts(*g, no_mul, rows_only), "expand") == 0);
}

TEST_CASE("a softmax with a scale or a mask splits into its elementwise part and a plain softmax") {
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{2, 4, 8});
  const ValueId mask = b.add_input("mask", ir::DType::F32, ir::Shape{2, 1, 8});
  std::vector<ir::AttrArg> attrs(ir::ops::softmax.attrs.size());
  attrs[static_cast<size_t>(ir::ops::softmax.attr_index("scale"))] = ir::AttrArg::of_float(0.25);
  const ValueId scaled = b.graph().nodes[b.add_op(ir::ops::softmax, std::vector<ValueId>{x, mask}, attrs)].first_output;
  const ValueId plain = node(b, ir::ops::softmax, {x});
  const ValueId outs[] = {scaled, plain};
  const auto g = b.finish({outs, 2});
  const auto out = ascend::split_scaled_softmax(*g);
  CHECK(count(*out, "softmax") == 2);
  CHECK(count(*out, "mul") == 1);
  CHECK(count(*out, "add") == 1);
  for (const ir::Node& n : out->nodes)
    if (std::strcmp(n.op->name, "softmax") == 0) CHECK((n.num_inputs < 2 || out->operands[n.first_input + 1] == ir::kNone));
  // The scores are rounded to f32 once more after the scale and after the mask.
  close_values(*g, *out, 1e-6);
}

TEST_CASE("a split becomes one slice per output") {
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{3, 10});
  const int64_t sizes[] = {2, 5, 3};
  std::vector<ir::AttrArg> attrs(ir::ops::split.attrs.size());
  attrs[static_cast<size_t>(ir::ops::split.attr_index("sizes"))] = ir::AttrArg::of_ints(sizes, 3);
  attrs[static_cast<size_t>(ir::ops::split.attr_index("axis"))] = ir::AttrArg::of_int(-1);
  const ir::Node& s = b.graph().nodes[b.add_op(ir::ops::split, std::vector<ValueId>{x}, attrs)];
  const ValueId outs[] = {s.first_output, s.first_output + 1, s.first_output + 2};
  const auto g = b.finish({outs, 3});
  const auto out = ascend::split_into_slices(*g);
  CHECK(count(*out, "split") == 0);
  CHECK(count(*out, "slice") == 3);
  same_values(*g, *out);
}

TEST_CASE("a convolution padded more on one side becomes a zero pad and a symmetric convolution") {
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{2, 3, 7, 6});
  const ValueId w = b.add_input("w", ir::DType::F32, ir::Shape{4, 3, 3, 2});
  const ValueId bias = b.add_input("b", ir::DType::F32, ir::Shape{4});
  auto conv = [&](std::vector<int64_t> pads, std::vector<int64_t> strides) {
    std::vector<ir::AttrArg> attrs(ir::ops::conv2d.attrs.size());
    attrs[static_cast<size_t>(ir::ops::conv2d.attr_index("pads"))] = ir::AttrArg::of_ints(pads.data(), pads.size());
    attrs[static_cast<size_t>(ir::ops::conv2d.attr_index("strides"))] = ir::AttrArg::of_ints(strides.data(), strides.size());
    return b.graph().nodes[b.add_op(ir::ops::conv2d, std::vector<ValueId>{x, w, bias}, attrs)].first_output;
  };
  // top, left, bottom, right: TF's SAME at stride 2, a one-sided pad, and one already symmetric
  const ValueId outs[] = {conv({0, 0, 1, 1}, {2, 2}), conv({2, 1, 0, 3}, {1, 1}), conv({1, 1, 1, 1}, {1, 1})};
  const auto g = b.finish({outs, 3});
  const auto out = ascend::pad_asymmetric_convolutions(*g);
  CHECK(count(*out, "pad") == 2);
  CHECK(count(*out, "conv2d") == 3);
  for (const ir::Node& n : out->nodes)
    if (std::strcmp(n.op->name, "conv2d") == 0) {
      const ir::Span<int64_t> p = out->ints_of(out->attrs[n.first_attr + static_cast<size_t>(n.op->attr_index("pads"))]);
      CHECK((p[0] == p[2] && p[1] == p[3]));
    }
  same_values(*g, *out);
}

TEST_CASE("a product over several axes becomes one product per axis") {
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{2, 3, 4, 5});
  auto prod = [&](std::vector<int64_t> axes, bool keep) {
    std::vector<ir::AttrArg> attrs(ir::ops::reduce_prod.attrs.size());
    attrs[static_cast<size_t>(ir::ops::reduce_prod.attr_index("axes"))] = ir::AttrArg::of_ints(axes.data(), axes.size());
    attrs[static_cast<size_t>(ir::ops::reduce_prod.attr_index("keepdims"))] = ir::AttrArg::of_bool(keep);
    return b.graph().nodes[b.add_op(ir::ops::reduce_prod, std::vector<ValueId>{x}, attrs)].first_output;
  };
  // Two axes dropped, three kept as 1 (a negative one among them); one axis and all axes stay.
  const ValueId outs[] = {prod({0, 2}, false), prod({3, -3, 0}, true), prod({1}, false), prod({}, false)};
  const auto g = b.finish({outs, 4});
  const auto out = ascend::split_products_over_axes(*g);
  CHECK(count(*out, "reduce_prod") == 2 + 3 + 1 + 1);
  CHECK(count(*out, "reshape") == 1);
  // Each product is rounded to f32 once more.
  close_values(*g, *out, 1e-5);
}

TEST_CASE("negative indices count from the end: constants rewritten, others wrapped by where") {
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{5, 4});
  const ValueId picks = b.add_input("picks", ir::DType::I64, ir::Shape{6});  // -3 .. 3 from the test data
  const int64_t negative[] = {-1, 0, -4, 2};
  const int32_t positive[] = {0, 3};
  const ValueId c_negative = b.add_constant(ir::DType::I64, ir::Shape{4}, negative, sizeof negative);
  const ValueId c_positive = b.add_constant(ir::DType::I32, ir::Shape{2}, positive, sizeof positive);
  auto gather = [&](ValueId indices, int64_t axis) {
    const ir::AttrArg a = ir::AttrArg::of_int(axis);
    return b.graph().nodes[b.add_op(ir::ops::gather, std::vector<ValueId>{x, indices}, {&a, 1})].first_output;
  };
  // scatter_nd's index tuples count from the end of each of their axes.
  const ValueId tuples = b.add_input("tuples", ir::DType::I64, ir::Shape{3, 2});
  const ValueId updates = b.add_input("updates", ir::DType::F32, ir::Shape{3});
  const ValueId scattered = node(b, ir::ops::scatter_nd, {x, tuples, updates});
  // An arg-reduction's indices are never negative: left as they are.
  const ValueId best = node(b, ir::ops::argmax, {x});
  const ValueId outs[] = {gather(picks, 0), gather(c_negative, -1), gather(c_positive, 1), scattered, gather(best, 0)};
  const auto g = b.finish({outs, 5});
  const auto out = ascend::wrap_negative_indices(*g);
  CHECK(count(*out, "gather") == 4);
  CHECK(count(*out, "where") == 2);  // the inputs' indices only
  bool rewritten = false;  // the constant with its negative indices counted from the end
  for (const ir::Node& n : out->nodes)
    if (n.blob != ir::kNone && out->values[n.first_output].dtype == ir::DType::I64 && out->shape(n.first_output).num_elements() == 4) {
      const int64_t* v = reinterpret_cast<const int64_t*>(out->blobs[n.blob]->data());
      rewritten = rewritten || (v[0] == 3 && v[1] == 0 && v[2] == 0 && v[3] == 2);
    }
  CHECK(rewritten);
  same_values(*g, *out);
}

TEST_CASE("an average pool padded as the backend's pool does not pad: a zero pad, no padding, a factor per position") {
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{2, 3, 7, 6});
  auto pool = [&](std::vector<int64_t> kernel, std::vector<int64_t> pads, std::vector<int64_t> strides, bool ceil) {
    std::vector<ir::AttrArg> attrs(ir::ops::avg_pool2d.attrs.size());
    attrs[static_cast<size_t>(ir::ops::avg_pool2d.attr_index("kernel"))] = ir::AttrArg::of_ints(kernel.data(), 2);
    attrs[static_cast<size_t>(ir::ops::avg_pool2d.attr_index("pads"))] = ir::AttrArg::of_ints(pads.data(), 4);
    attrs[static_cast<size_t>(ir::ops::avg_pool2d.attr_index("strides"))] = ir::AttrArg::of_ints(strides.data(), 2);
    attrs[static_cast<size_t>(ir::ops::avg_pool2d.attr_index("ceil_mode"))] = ir::AttrArg::of_bool(ceil);
    return b.graph().nodes[b.add_op(ir::ops::avg_pool2d, std::vector<ValueId>{x}, attrs)].first_output;
  };
  // TF's SAME at stride 2, a one-sided pad, pads beyond half the window, one the pool takes, and
  // a ceil-mode window past the padded input (left as it is).
  const ValueId outs[] = {pool({3, 3}, {0, 0, 1, 1}, {2, 2}, false), pool({3, 2}, {2, 1, 0, 1}, {1, 1}, false),
                          pool({3, 3}, {2, 2, 2, 2}, {1, 1}, false), pool({3, 3}, {1, 1, 1, 1}, {1, 1}, false),
                          pool({3, 3}, {0, 0, 1, 0}, {2, 2}, true)};
  const auto g = b.finish({outs, 5});
  const auto takes = [](const ir::Graph& gr, const ir::Node& n) {  // symmetric, at most half the window
    const ir::Span<int64_t> p = gr.ints_of(gr.attrs[n.first_attr + static_cast<size_t>(n.op->attr_index("pads"))]);
    const ir::Span<int64_t> k = gr.ints_of(gr.attrs[n.first_attr + static_cast<size_t>(n.op->attr_index("kernel"))]);
    return p[0] == p[2] && p[1] == p[3] && 2 * p[0] <= k[0] && 2 * p[1] <= k[1];
  };
  const auto out = ascend::pad_average_pools(*g, takes);
  CHECK(count(*out, "pad") == 3);
  CHECK(count(*out, "mul") == 3);
  CHECK(count(*out, "avg_pool2d") == 5);
  // The factor rounds the mean once more.
  close_values(*g, *out, 1e-6);
}

TEST_CASE("quantize, dequantize, quantized sums and 8-bit max pools become f32 arithmetic between casts, bit for bit") {
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{1, 2, 4, 4});
  const uint8_t zp = 128, y_zp = 3;
  const int8_t zero = 0;
  const ValueId u8_zp = b.add_constant(ir::DType::U8, ir::Shape{}, &zp, 1), i8_zero = b.add_constant(ir::DType::I8, ir::Shape{}, &zero, 1);
  const float per_channel[] = {0.02f, 0.05f};
  const ValueId scales = b.add_constant(ir::DType::F32, ir::Shape{2, 1, 1}, per_channel, sizeof per_channel);
  const ValueId q = node(b, ir::ops::quantize_linear, {x, scales, u8_zp});
  const ValueId s = node(b, ir::ops::quantize_linear, {x, test::scalar(b, 0.01f), i8_zero});  // a zero point folded away
  const ValueId sum = node(b, ir::ops::quantized_add,
                           {q, scales, u8_zp, s, test::scalar(b, 0.01f), i8_zero, test::scalar(b, 0.1f),
                            b.add_constant(ir::DType::U8, ir::Shape{}, &y_zp, 1)},
                           {ir::AttrArg::of_float(0), ir::AttrArg::of_float(6)});
  const int64_t window[] = {2, 2};
  std::vector<ir::AttrArg> pool(ir::ops::max_pool2d.attrs.size());
  pool[static_cast<size_t>(ir::ops::max_pool2d.attr_index("kernel"))] = ir::AttrArg::of_ints(window, 2);
  const ValueId outs[] = {node(b, ir::ops::dequantize_linear, {q, scales, u8_zp}), sum, node(b, ir::ops::max_pool2d, {s}, pool)};
  const auto g = b.finish({outs, 3});
  const auto out = ascend::quantized_as_floats(*g);
  for (const char* op : {"quantize_linear", "dequantize_linear", "quantized_add"}) CHECK(count(*out, op) == 0);
  CHECK(count(*out, "max_pool2d") == 1);
  same_values(*g, *out);
}

TEST_CASE("a product of u8 activations becomes one of int8 activations and the column sums' term") {
  for (const bool constant_zero_point : {true, false}) {
    ir::Builder b;
    const ValueId a = b.add_input("a", ir::DType::U8, ir::Shape{3, 16});
    std::vector<int8_t> w(16 * 5);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>(i * 37 % 255) - 127);
    const uint8_t zp = 200;
    const int8_t zero = 0;
    const ValueId a_zp = constant_zero_point ? b.add_constant(ir::DType::U8, ir::Shape{}, &zp, 1) : b.add_input("zp", ir::DType::U8, ir::Shape{});
    const ValueId y = node(b, ir::ops::matmul_integer,
                           {a, b.add_constant(ir::DType::I8, ir::Shape{16, 5}, w.data(), w.size()), a_zp,
                            b.add_constant(ir::DType::I8, ir::Shape{}, &zero, 1)});
    const auto g = b.finish({&y, 1});
    const auto out = ascend::signed_activations(*g);
    for (const ir::Node& n : out->nodes)
      if (std::strcmp(n.op->name, "matmul_integer") == 0) CHECK(out->values[out->operands[n.first_input]].dtype == ir::DType::I8);
    CHECK(count(*out, "mul") == (constant_zero_point ? 0 : 1));  // the term folded for a constant zero point
    same_values(*g, *out);
  }
}

namespace {

// quantized_conv2d of a 2 x 5 x 5 image `x` (its zero point `x_zp`) by three 3 x 3 filters,
// padded by 1, requantized to u8 around 5, a Relu folded.
ValueId quantized_convolution(ir::Builder& b, ValueId x, ValueId x_zp) {
  std::vector<int8_t> w(3 * 2 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>(i * 53 % 255) - 127);
  const float w_scale[] = {0.004f, 0.006f, 0.01f};
  const int8_t w_zp[] = {0, 0, 0};
  const int32_t bias[] = {-700, 20, 900};
  const uint8_t y_zp = 5;
  std::vector<ir::AttrArg> attrs(ir::ops::quantized_conv2d.attrs.size());
  const int64_t pads[] = {1, 1, 1, 1};
  attrs[static_cast<size_t>(ir::ops::quantized_conv2d.attr_index("pads"))] = ir::AttrArg::of_ints(pads, 4);
  attrs[static_cast<size_t>(ir::ops::quantized_conv2d.attr_index("min"))] = ir::AttrArg::of_float(0);
  const std::vector<ValueId> in = {x,
                                   test::scalar(b, 0.05f),
                                   x_zp,
                                   b.add_constant(ir::DType::I8, ir::Shape{3, 2, 3, 3}, w.data(), w.size()),
                                   b.add_constant(ir::DType::F32, ir::Shape{3}, w_scale, sizeof w_scale),
                                   b.add_constant(ir::DType::I8, ir::Shape{3}, w_zp, sizeof w_zp),
                                   test::scalar(b, 0.2f),
                                   b.add_constant(ir::DType::U8, ir::Shape{}, &y_zp, 1),
                                   b.add_constant(ir::DType::I32, ir::Shape{3}, bias, sizeof bias)};
  return b.graph().nodes[b.add_op(ir::ops::quantized_conv2d, in, attrs)].first_output;
}

// That convolution of an input image of `type`, its zero point the one byte `zero_point`.
std::unique_ptr<ir::Graph> convolution_graph(ir::DType type, uint8_t zero_point) {
  ir::Builder b;
  const ValueId y =
      quantized_convolution(b, b.add_input("x", type, ir::Shape{1, 2, 5, 5}), b.add_constant(type, ir::Shape{}, &zero_point, 1));
  return b.finish({&y, 1});
}

}  // namespace

TEST_CASE("an int8 convolution with an 8-bit result becomes one with an f16 result and the requantization after it") {
  const auto g = convolution_graph(ir::DType::I8, 0);
  const auto out = ascend::requantize_after_convolutions(*g, [](const ir::Graph&, const ir::Node&) { return true; });
  for (const ir::Node& n : out->nodes)
    if (std::strcmp(n.op->name, "quantized_conv2d") == 0) CHECK(out->values[n.first_output].dtype == ir::DType::F16);
  CHECK(count(*out, "round") == 1);
  CHECK(count(*out, "clip") == 1);
  // Within one step: f16 holds the result in the output's units to 1/8 or better below 256.
  ir::verify(*out);
  const auto want = test::outputs(*g), got = test::outputs(*out);
  for (int64_t i = 0; i < want[0].size(); ++i) CHECK(std::abs(eval::load_f(got[0], i) - eval::load_f(want[0], i)) <= 1);
  CHECK(count(*ascend::requantize_after_convolutions(*g, [](const ir::Graph&, const ir::Node&) { return false; }), "round") == 0);
}

TEST_CASE("a convolution of u8 activations: the image padded with its zero point, shifted into int8, the filters' sums in the bias") {
  const auto g = convolution_graph(ir::DType::U8, 100);
  const auto out = ascend::signed_activations(*g);
  CHECK(count(*out, "pad") == 1);
  for (const ir::Node& n : out->nodes)
    if (std::strcmp(n.op->name, "quantized_conv2d") == 0) {
      CHECK(out->values[out->operands[n.first_input]].dtype == ir::DType::I8);
      for (int64_t p : ir::QuantizedConv2dAttrs(*out, n).pads) CHECK(p == 0);
    }
  same_values(*g, *out);
}
