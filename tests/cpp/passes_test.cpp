// The rewriting passes: each removes what it should, keeps what it must, and the graph computes
// the same values afterwards (checked with the reference evaluator).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "eval/evaluate.hpp"
#include "ir/builder.hpp"
#include "ir_build.hpp"
#include "ir/ops.gen.hpp"
#include "ir/verify.hpp"
#include "passes/passes.hpp"

using namespace esg;
using ir::ValueId;
using test::node;
using test::scalar;

namespace {

size_t count(const ir::Graph& g, const char* op) {
  size_t n = 0;
  for (const ir::Node& node : g.nodes) n += std::strcmp(node.op->name, op) == 0;
  return n;
}

// The graph's outputs on one fixed input (every input gets the same deterministic data).
std::vector<eval::HostTensor> outputs(const ir::Graph& g) {
  std::vector<eval::HostTensor> in;
  for (ValueId v : g.inputs()) {
    eval::HostTensor t(g.values[v].dtype, g.shape(v));
    for (int64_t i = 0; i < t.size(); ++i) eval::store_f(t, i, std::sin(static_cast<double>(i)) * 3);
    in.push_back(t);
  }
  return eval::evaluate(g, in);
}

void same_values(const ir::Graph& a, const ir::Graph& b) {
  ir::verify(b);
  const auto x = outputs(a), y = outputs(b);
  REQUIRE(x.size() == y.size());
  for (size_t k = 0; k < x.size(); ++k) {
    CHECK(x[k].shape == y[k].shape);
    CHECK(x[k].bytes == y[k].bytes);
  }
}

// The same values but for rounding (a rewrite that rounds an intermediate once more).
void close_values(const ir::Graph& a, const ir::Graph& b, double epsilon) {
  ir::verify(b);
  const auto want = outputs(a), got = outputs(b);
  REQUIRE(want.size() == got.size());
  for (size_t k = 0; k < want.size(); ++k) {
    CHECK(got[k].shape == want[k].shape);
    REQUIRE(got[k].size() == want[k].size());
    for (int64_t i = 0; i < want[k].size(); ++i) CHECK(eval::load_f(got[k], i) == doctest::Approx(eval::load_f(want[k], i)).epsilon(epsilon));
  }
}

}  // namespace

TEST_CASE("dead code goes, what the outputs need stays") {
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{4});
  node(b, ir::ops::exp, {x});                     // unused
  const ValueId y = node(b, ir::ops::log, {node(b, ir::ops::abs, {x})});
  const auto g = b.finish({&y, 1});
  const auto out = passes::eliminate_dead_code(*g);
  CHECK(out->nodes.size() == 2);
  CHECK(count(*out, "exp") == 0);
  same_values(*g, *out);
}

TEST_CASE("common subexpressions are computed once") {
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{4});
  const ValueId y = node(b, ir::ops::add, {node(b, ir::ops::exp, {x}), node(b, ir::ops::exp, {x})});
  const ValueId z = node(b, ir::ops::mul, {y, node(b, ir::ops::exp, {x})});
  const auto g = b.finish({&z, 1});
  const auto out = passes::eliminate_dead_code(*passes::eliminate_common_subexpressions(*g));
  CHECK(count(*out, "exp") == 1);
  same_values(*g, *out);
}

TEST_CASE("constants fold through the reference kernels") {
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{3});
  const ValueId c = node(b, ir::ops::exp, {node(b, ir::ops::add, {scalar(b, 1), scalar(b, 2)})});
  const ValueId y = node(b, ir::ops::mul, {x, c});
  const auto g = b.finish({&y, 1});
  const auto out = passes::eliminate_dead_code(*passes::fold_constants(*g));
  CHECK(count(*out, "exp") == 0);
  CHECK(count(*out, "add") == 0);
  CHECK(out->nodes.size() == 2);  // the folded constant and the mul
  same_values(*g, *out);
}

TEST_CASE("simplification: neutral elements, transpose, reshape and cast chains") {
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{2, 3, 4});
  ValueId v = node(b, ir::ops::mul, {x, scalar(b, 1)});
  v = node(b, ir::ops::add, {scalar(b, 0), v});
  const int64_t p1[] = {1, 0, 2}, p2[] = {1, 0, 2}, p3[] = {0, 2, 1};
  v = node(b, ir::ops::transpose, {node(b, ir::ops::transpose, {v}, {ir::AttrArg::of_ints(p1, 3)})}, {ir::AttrArg::of_ints(p2, 3)});
  const ValueId t2 = node(b, ir::ops::transpose, {node(b, ir::ops::transpose, {v}, {ir::AttrArg::of_ints(p1, 3)})}, {ir::AttrArg::of_ints(p3, 3)});
  const int64_t s1[] = {6, 4}, s2[] = {24};
  const ValueId r = node(b, ir::ops::reshape, {node(b, ir::ops::reshape, {t2}, {ir::AttrArg::of_ints(s1, 2)})}, {ir::AttrArg::of_ints(s2, 1)});
  const ValueId same = node(b, ir::ops::cast, {r}, {ir::AttrArg::of_dtype(ir::DType::F32)});
  const ValueId wide = node(b, ir::ops::cast, {node(b, ir::ops::cast, {same}, {ir::AttrArg::of_dtype(ir::DType::F64)})},
                            {ir::AttrArg::of_dtype(ir::DType::F32)});
  // f32 -> i32 -> f32 truncates: it must stay.
  const ValueId lossy = node(b, ir::ops::cast, {node(b, ir::ops::cast, {wide}, {ir::AttrArg::of_dtype(ir::DType::I32)})},
                             {ir::AttrArg::of_dtype(ir::DType::F32)});
  const auto g = b.finish({&lossy, 1});
  const auto out = passes::eliminate_dead_code(*passes::simplify(*g));
  CHECK(count(*out, "mul") == 0);
  CHECK(count(*out, "add") == 0);
  CHECK(count(*out, "transpose") == 1);  // two cancelled, two composed into one
  CHECK(count(*out, "reshape") == 1);
  // f32->f32 and the round trip f32->f64->f32 are gone; f32->i32->f32 truncates and stays.
  CHECK(count(*out, "cast") == 2);
  same_values(*g, *out);
}

TEST_CASE("x * 1 stays when the 1 broadcasts x to a larger shape") {
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{3});
  const float ones[6] = {1, 1, 1, 1, 1, 1};
  const ValueId c = b.add_constant(ir::DType::F32, ir::Shape{2, 3}, ones, sizeof ones);
  const ValueId y = node(b, ir::ops::mul, {x, c});
  const auto g = b.finish({&y, 1});
  const auto out = passes::simplify(*g);
  CHECK(count(*out, "mul") == 1);
  same_values(*g, *out);
}

TEST_CASE("the whole pipeline logs every pass and keeps the values") {
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{4});
  const ValueId y = node(b, ir::ops::add, {node(b, ir::ops::exp, {x}), node(b, ir::ops::mul, {node(b, ir::ops::exp, {x}), scalar(b, 1)})});
  const auto g = b.finish({&y, 1});
  std::vector<std::string> log;
  const auto out = passes::optimize(*g, true, &log);
  CHECK(log.size() == 5);
  CHECK(log[0].find("simplify") == 0);
  CHECK(count(*out, "exp") == 1);
  CHECK(count(*out, "mul") == 0);
  same_values(*g, *out);
}

TEST_CASE("a batch norm after a convolution folds into its weights and bias") {
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{2, 3, 6, 5});
  std::vector<float> w(4 * 3 * 3 * 3), bias{0.5f, -1.0f, 0.25f, 2.0f}, mean{0.1f, 0.2f, -0.3f, 0.4f}, k{1.5f, -0.5f, 2.0f, 0.75f},
      shift{0.0f, 1.0f, -1.0f, 3.0f};
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i));
  const ValueId wc = b.add_constant(ir::DType::F32, ir::Shape{4, 3, 3, 3}, w.data(), w.size() * 4);
  const ValueId bc = b.add_constant(ir::DType::F32, ir::Shape{4}, bias.data(), 16);
  auto channel = [&](const std::vector<float>& v) { return b.add_constant(ir::DType::F32, ir::Shape{4, 1, 1}, v.data(), 16); };
  const int64_t pads[] = {1, 1, 1, 1};
  const ValueId conv = node(b, ir::ops::conv2d, {x, wc, bc}, {ir::AttrArg(), ir::AttrArg::of_ints(pads, 4)});
  // (conv - mean) * k + shift, then a relu the fold leaves alone; and a second, unfoldable use.
  const ValueId bn = node(b, ir::ops::add, {node(b, ir::ops::mul, {node(b, ir::ops::sub, {conv, channel(mean)}), channel(k)}), channel(shift)});
  const ValueId y = node(b, ir::ops::relu, {bn});
  const auto g = b.finish({&y, 1});
  const auto out = passes::optimize(*g, true, nullptr);
  CHECK(count(*out, "conv2d") == 1);
  CHECK(count(*out, "sub") + count(*out, "mul") + count(*out, "add") == 0);
  close_values(*g, *out, 1e-5);

  // Read twice, the convolution's result must stay as it is.
  ir::Builder b2;
  const ValueId x2 = b2.add_input("x", ir::DType::F32, ir::Shape{1, 3, 4, 4});
  const ValueId w2 = b2.add_constant(ir::DType::F32, ir::Shape{4, 3, 3, 3}, w.data(), w.size() * 4);
  const ValueId c2 = node(b2, ir::ops::conv2d, {x2, w2, ir::kNone});
  const ValueId outs[] = {node(b2, ir::ops::mul, {c2, b2.add_constant(ir::DType::F32, ir::Shape{4, 1, 1}, k.data(), 16)}), c2};
  const auto g2 = b2.finish({outs, 2});
  CHECK(count(*passes::optimize(*g2, true, nullptr), "mul") == 1);
}

TEST_CASE("the convolution fold leaves a division by zero alone") {
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{1, 1, 3, 3});
  const float w[1] = {2.0f}, zero[1] = {0.0f};
  const ValueId conv = node(b, ir::ops::conv2d, {x, b.add_constant(ir::DType::F32, ir::Shape{1, 1, 1, 1}, w, 4), ir::kNone});
  const ValueId y = node(b, ir::ops::div, {conv, b.add_constant(ir::DType::F32, ir::Shape{1, 1, 1}, zero, 4)});
  const auto g = b.finish({&y, 1});
  // conv / 0 is ±inf (NaN where the conv gives 0); folded, the weights would be inf and NaN.
  CHECK(count(*passes::optimize(*g, true, nullptr), "div") == 1);
}

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
  const auto out = passes::materialize_broadcasts(*g, every_op, rows_only);
  CHECK(count(*out, "expand") == 1);  // mul(x, column) only: z's operands are its own shape
  same_values(*g, *out);
  CHECK(count(*passes::materialize_broadcasts(*g, every_op, [](const ir::Shape&, ir::DType, const ir::Shape&) { return true; }), "expand") == 0);
  // Ops the backend's kernels do not run (its library broadcasts for them) are left alone.
  const auto no_mul = [](const ir::Graph&, const ir::Node& n) { return std::strcmp(n.op->name, "mul") != 0; };
  CHECK(count(*passes::materialize_broadcasts(*g, no_mul, rows_only), "expand") == 0);
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
  const auto out = passes::split_scaled_softmax(*g);
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
  const auto out = passes::split_into_slices(*g);
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
  const auto out = passes::pad_asymmetric_convolutions(*g);
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
  const auto out = passes::split_products_over_axes(*g);
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
  const auto out = passes::wrap_negative_indices(*g);
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
  const auto out = passes::pad_average_pools(*g, takes);
  CHECK(count(*out, "pad") == 3);
  CHECK(count(*out, "mul") == 3);
  CHECK(count(*out, "avg_pool2d") == 5);
  // The factor rounds the mean once more.
  close_values(*g, *out, 1e-6);
}
