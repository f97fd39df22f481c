// The target-independent rewriting passes: each removes what it should, keeps what it must, and
// the graph computes the same values afterwards (checked with the reference evaluator). The
// Ascend legalizations have their own suite (ascend_legalize_test.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "ir/builder.hpp"
#include "ir_build.hpp"
#include "ir/op_attrs.gen.hpp"
#include "ir/ops.gen.hpp"
#include "passes/passes.hpp"
#include "rewrite_check.hpp"

using namespace esg;
using ir::ValueId;
using test::close_values;
using test::count;
using test::node;
using test::same_values;
using test::scalar;

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

TEST_CASE("a reshaped or unsqueezed constant folds onto the same bytes, not a copy") {
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{2, 3});
  const std::vector<float> w = {1, 2, 3, 4, 5, 6};
  const ValueId c = b.add_constant(ir::DType::F32, ir::Shape{6}, w.data(), w.size() * sizeof(float));
  const int64_t shape[] = {2, 3}, axes[] = {0};
  const ValueId r = node(b, ir::ops::reshape, {c}, {ir::AttrArg::of_ints(shape, 2)});
  const ValueId y = node(b, ir::ops::add, {x, node(b, ir::ops::unsqueeze, {r}, {ir::AttrArg::of_ints(axes, 1)})});
  const auto g = b.finish({&y, 1});
  const auto out = passes::eliminate_dead_code(*passes::fold_constants(*g));
  CHECK(count(*out, "reshape") == 0);
  CHECK(count(*out, "unsqueeze") == 0);
  REQUIRE(out->blobs.size() == 1);
  CHECK(out->blobs[0].get() == g->blobs[0].get());  // the one constant's own bytes
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

TEST_CASE("an exported layer norm (means over the trailing axes) becomes one layer_norm computing the same") {
  for (const bool by_pow : {true, false}) {
    CAPTURE(by_pow);
    ir::Builder b;
    const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{3, 2, 4});
    const int64_t last[] = {1, 2};  // the trailing axes from 1 on, as positive axes
    const std::vector<ir::AttrArg> mean_attrs = {ir::AttrArg::of_ints(last, 2), ir::AttrArg::of_bool(true)};
    const ValueId d = node(b, ir::ops::sub, {x, node(b, ir::ops::reduce_mean, {x}, mean_attrs)});
    const ValueId sq = by_pow ? node(b, ir::ops::pow, {d, scalar(b, 2)}) : node(b, ir::ops::mul, {d, d});
    const ValueId var = node(b, ir::ops::reduce_mean, {sq}, mean_attrs);
    const ValueId y = node(b, ir::ops::div, {d, node(b, ir::ops::sqrt, {node(b, ir::ops::add, {scalar(b, 1e-3f), var})})});
    const auto g = b.finish({&y, 1});
    const auto out = passes::optimize(*g, true, nullptr);
    CHECK(count(*out, "layer_norm") == 1);
    CHECK(count(*out, "reduce_mean") == 0);
    close_values(*g, *out, 1e-5);  // one kernel rounds less often than the decomposed ops
  }
}

TEST_CASE("exported SiLU and GELU become one silu and one gelu computing the same") {
  for (const int form : {0, 1, 2, 3}) {  // x·sigmoid(x), sigmoid(x)·x, GELU by x/√2, GELU by x·(1/√2) with 0.5 first
    CAPTURE(form);
    ir::Builder b;
    const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{3, 5});
    ValueId y;
    if (form < 2) {
      const ValueId s = node(b, ir::ops::sigmoid, {x});
      y = form == 0 ? node(b, ir::ops::mul, {x, s}) : node(b, ir::ops::mul, {s, x});
    } else {
      const ValueId scaled = form == 2 ? node(b, ir::ops::div, {x, scalar(b, 1.4142135f)}) : node(b, ir::ops::mul, {scalar(b, 0.70710677f), x});
      const ValueId plus = node(b, ir::ops::add, {node(b, ir::ops::erf, {scaled}), scalar(b, 1)});
      y = form == 2 ? node(b, ir::ops::mul, {node(b, ir::ops::mul, {x, plus}), scalar(b, 0.5f)})
                    : node(b, ir::ops::mul, {node(b, ir::ops::mul, {scalar(b, 0.5f), x}), plus});
    }
    const auto g = b.finish({&y, 1});
    const auto out = passes::optimize(*g, true, nullptr);
    CHECK(count(*out, form < 2 ? "silu" : "gelu") == 1);
    CHECK(count(*out, "mul") == 0);
    close_values(*g, *out, 1e-5);
  }
  // x·sigmoid(y) and a product whose scale is not 1/√2 stay as written.
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{4});
  const ValueId z = b.add_input("z", ir::DType::F32, ir::Shape{4});
  const ValueId plus = node(b, ir::ops::add, {node(b, ir::ops::erf, {node(b, ir::ops::div, {x, scalar(b, 2.0f)})}), scalar(b, 1)});
  const ValueId ys[] = {node(b, ir::ops::mul, {x, node(b, ir::ops::sigmoid, {z})}),
                        node(b, ir::ops::mul, {node(b, ir::ops::mul, {x, plus}), scalar(b, 0.5f)})};
  const auto g = b.finish({ys, 2});
  const auto out = passes::optimize(*g, true, nullptr);
  CHECK(count(*out, "silu") + count(*out, "gelu") == 0);
}

TEST_CASE("exported attention scores (matmul, scale, mask, softmax) become one scaled, masked softmax computing the same") {
  // form: 0 scores / 8 + mask, 1 mask + scores * 0.125, 2 scores / 8 without a mask, 3 (q / 8)·kᵀ +
  // mask (PyTorch's export of nn.MultiheadAttention).
  for (const int form : {0, 1, 2, 3}) {
    CAPTURE(form);
    ir::Builder b;
    const ValueId q = b.add_input("q", ir::DType::F32, ir::Shape{2, 3, 5, 4});
    const ValueId k = b.add_input("k", ir::DType::F32, ir::Shape{2, 3, 5, 4});
    const ValueId mask = b.add_input("mask", ir::DType::F32, ir::Shape{2, 1, 1, 5});
    const ValueId q_in = form == 3 ? node(b, ir::ops::div, {q, scalar(b, 8)}) : q;
    const ValueId scores = node(b, ir::ops::matmul, {q_in, k}, {ir::AttrArg::of_bool(false), ir::AttrArg::of_bool(true)});
    const ValueId scaled = form == 3   ? scores
                           : form == 1 ? node(b, ir::ops::mul, {scores, scalar(b, 0.125f)})
                                       : node(b, ir::ops::div, {scores, scalar(b, 8)});
    const ValueId logits = form == 1 ? node(b, ir::ops::add, {mask, scaled}) : form == 2 ? scaled : node(b, ir::ops::add, {scaled, mask});
    const ValueId y = node(b, ir::ops::softmax, {logits});
    const auto g = b.finish({&y, 1});
    const auto out = passes::optimize(*g, true, nullptr);
    CHECK(count(*out, "softmax") == 1);
    CHECK(count(*out, "div") + count(*out, "mul") + count(*out, "add") == 0);
    close_values(*g, *out, 1e-5);
  }
  // A mask that broadcasts the scores to a larger shape, and a scale that is not a constant, stay.
  ir::Builder b;
  const ValueId s = b.add_input("s", ir::DType::F32, ir::Shape{1, 5});
  const ValueId wide = b.add_input("wide", ir::DType::F32, ir::Shape{3, 5});
  const ValueId c = b.add_input("c", ir::DType::F32, ir::Shape{1});
  const ValueId ys[] = {node(b, ir::ops::softmax, {node(b, ir::ops::add, {node(b, ir::ops::div, {s, scalar(b, 8)}), wide})}),
                        node(b, ir::ops::softmax, {node(b, ir::ops::div, {s, c})})};
  const auto g = b.finish({ys, 2});
  const auto out = passes::optimize(*g, true, nullptr);
  CHECK(count(*out, "div") == 2);
}

namespace {

ValueId reshape(ir::Builder& b, ValueId x, std::vector<int64_t> dims) {
  return node(b, ir::ops::reshape, {x}, {ir::AttrArg::of_ints(dims.data(), dims.size())});
}

ValueId transpose(ir::Builder& b, ValueId x, std::vector<int64_t> perm) {
  return node(b, ir::ops::transpose, {x}, {ir::AttrArg::of_ints(perm.data(), perm.size())});
}

ValueId product(ir::Builder& b, ValueId a, ValueId c, bool transpose_b = false) {
  return node(b, ir::ops::matmul, {a, c}, {ir::AttrArg::of_bool(false), ir::AttrArg::of_bool(transpose_b)});
}

}  // namespace

TEST_CASE("attention as PyTorch exports nn.MultiheadAttention (sequence first) becomes one op reading the heads in place") {
  // [seq 5, batch 2, 3 heads · 4] projections; each split to [batch·heads, seq, 4] by a reshape
  // and a transpose, k transposed further for the product; a mask per batch·head.
  ir::Builder b;
  const ValueId q = b.add_input("q", ir::DType::F32, ir::Shape{5, 2, 12});
  const ValueId k = b.add_input("k", ir::DType::F32, ir::Shape{7, 2, 12});
  const ValueId v = b.add_input("v", ir::DType::F32, ir::Shape{7, 2, 12});
  const ValueId mask = b.add_input("mask", ir::DType::F32, ir::Shape{6, 1, 7});
  const ValueId qh = transpose(b, reshape(b, q, {5, 6, 4}), {1, 0, 2});
  const ValueId kt = transpose(b, reshape(b, k, {7, 6, 4}), {1, 2, 0});
  const ValueId vh = transpose(b, reshape(b, v, {7, 6, 4}), {1, 0, 2});
  const ValueId scores = product(b, node(b, ir::ops::div, {qh, scalar(b, 2)}), kt);
  const ValueId probs = node(b, ir::ops::softmax, {node(b, ir::ops::add, {scores, mask})});
  const ValueId y = reshape(b, transpose(b, product(b, probs, vh), {1, 0, 2}), {10, 12});
  const auto g = b.finish({&y, 1});
  const auto out = passes::optimize(*g, true, nullptr);
  CHECK(count(*out, "attention") == 1);
  CHECK(count(*out, "matmul") + count(*out, "softmax") + count(*out, "transpose") == 0);
  CHECK(count(*out, "reshape") == 2);  // the mask per batch and head, the result's [10, 12]: views
  for (const ir::Node& n : out->nodes)
    if (n.op->kind == ir::OpKind::attention) {
      const ir::AttentionAttrs a(*out, n);
      CHECK(a.num_heads == 3);
      CHECK(a.seq_first);
      CHECK(a.scale == 0.5);
      CHECK(out->operands[n.first_input] == out->inputs()[0]);  // q as given, no copy
    }
  close_values(*g, *out, 1e-5);
}

TEST_CASE("attention with heads split Hugging Face style ([batch, seq, heads, size], transposed) and joined back is one op") {
  ir::Builder b;
  const ValueId x[3] = {b.add_input("q", ir::DType::F32, ir::Shape{2, 5, 12}), b.add_input("k", ir::DType::F32, ir::Shape{2, 7, 12}),
                        b.add_input("v", ir::DType::F32, ir::Shape{2, 7, 12})};
  const ValueId mask = b.add_input("mask", ir::DType::F32, ir::Shape{2, 1, 1, 7});
  const ValueId qh = transpose(b, reshape(b, x[0], {2, 5, 3, 4}), {0, 2, 1, 3});
  const ValueId kt = transpose(b, reshape(b, x[1], {2, 7, 3, 4}), {0, 2, 3, 1});
  const ValueId vh = transpose(b, reshape(b, x[2], {2, 7, 3, 4}), {0, 2, 1, 3});
  const ValueId scores = node(b, ir::ops::mul, {product(b, qh, kt), scalar(b, 0.5f)});
  const ValueId probs = node(b, ir::ops::softmax, {node(b, ir::ops::add, {mask, scores})});
  const ValueId y = reshape(b, transpose(b, product(b, probs, vh), {0, 2, 1, 3}), {2, 5, 12});
  const auto g = b.finish({&y, 1});
  const auto out = passes::optimize(*g, true, nullptr);
  CHECK(count(*out, "attention") == 1);
  CHECK(count(*out, "transpose") + count(*out, "reshape") + count(*out, "matmul") == 0);
  close_values(*g, *out, 1e-5);
}

TEST_CASE("a decoder step's attention over a cache ([batch, heads, seq, size]) is one op; probabilities read elsewhere stay") {
  for (const bool probs_out : {false, true}) {
    CAPTURE(probs_out);
    ir::Builder b;
    const ValueId q = b.add_input("q", ir::DType::F32, ir::Shape{1, 4, 1, 8});
    const ValueId past = b.add_input("past", ir::DType::F32, ir::Shape{1, 4, 6, 8});
    const ValueId now = b.add_input("now", ir::DType::F32, ir::Shape{1, 4, 1, 8});
    const ValueId cache = node(b, ir::ops::concat, {past, now}, {ir::AttrArg::of_int(2)});
    const ValueId scores = product(b, node(b, ir::ops::div, {q, scalar(b, 8)}), cache, true);
    const ValueId probs = node(b, ir::ops::softmax, {scores});
    const ValueId ys[] = {product(b, probs, cache), probs};
    const auto g = b.finish({ys, probs_out ? 2u : 1u});
    const auto out = passes::optimize(*g, true, nullptr);
    CHECK(count(*out, "attention") == (probs_out ? 0 : 1));
    CHECK(count(*out, "matmul") == (probs_out ? 2 : 0));
    close_values(*g, *out, 1e-5);
  }
}

TEST_CASE("attention decomposes into the products and softmax it stands for, in every layout") {
  struct Case {
    ir::Shape q, k, v, mask;
    int64_t heads;
    bool seq_first;
    double scale;
  };
  const Case cases[] = {{{2, 3, 5, 4}, {2, 3, 7, 4}, {2, 3, 7, 6}, {2, 1, 1, 7}, 1, false, 0},
                        {{2, 5, 12}, {2, 7, 12}, {2, 7, 6}, {5, 7}, 3, false, 0.3},
                        {{5, 2, 12}, {7, 2, 12}, {7, 2, 12}, {2, 3, 5, 7}, 3, true, 0}};
  for (const Case& c : cases) {
    CAPTURE(c.q.rank());
    CAPTURE(c.seq_first);
    ir::Builder b;
    const ValueId in[] = {b.add_input("q", ir::DType::F32, c.q), b.add_input("k", ir::DType::F32, c.k),
                          b.add_input("v", ir::DType::F32, c.v), b.add_input("mask", ir::DType::F32, c.mask)};
    const ValueId y = node(b, ir::ops::attention, {in[0], in[1], in[2], in[3]},
                           {ir::AttrArg::of_int(c.heads), ir::AttrArg::of_float(c.scale), ir::AttrArg::of_bool(c.seq_first)});
    const auto g = b.finish({&y, 1});
    const auto out = passes::decompose_attention(*g);
    CHECK(count(*out, "attention") == 0);
    CHECK(count(*out, "matmul") == 2);
    CHECK(count(*out, "softmax") == 1);
    close_values(*g, *out, 1e-5);
  }
}

TEST_CASE("a channel shuffle (reshape, transpose, reshape) and its halves become gathers of the channels") {
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{2, 12, 3, 5});
  const int64_t split[] = {2, 2, 6, 3, 5}, perm[] = {0, 2, 1, 3, 4}, back[] = {2, 12, 3, 5};
  const ValueId r1 = node(b, ir::ops::reshape, {x}, {ir::AttrArg::of_ints(split, 5)});
  const ValueId t = node(b, ir::ops::transpose, {r1}, {ir::AttrArg::of_ints(perm, 5)});
  const ValueId shuffled = node(b, ir::ops::reshape, {t}, {ir::AttrArg::of_ints(back, 4)});
  std::vector<ir::AttrArg> slice(ir::ops::slice.attrs.size());
  const int64_t starts[] = {6}, ends[] = {12}, axes[] = {1};
  slice[ir::SliceAttrs::Index::starts] = ir::AttrArg::of_ints(starts, 1);
  slice[ir::SliceAttrs::Index::ends] = ir::AttrArg::of_ints(ends, 1);
  slice[ir::SliceAttrs::Index::axes] = ir::AttrArg::of_ints(axes, 1);
  const ValueId ys[] = {shuffled, node(b, ir::ops::slice, {shuffled}, slice)};
  const auto g = b.finish({ys, 2});
  const auto out = passes::optimize(*g, true, nullptr);
  CHECK(count(*out, "gather") == 2);
  CHECK(count(*out, "transpose") + count(*out, "reshape") + count(*out, "slice") == 0);
  same_values(*g, *out);  // a gather copies exactly what the shuffle moved
}

TEST_CASE("the whole pipeline logs every pass and keeps the values") {
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{4});
  const ValueId y = node(b, ir::ops::add, {node(b, ir::ops::exp, {x}), node(b, ir::ops::mul, {node(b, ir::ops::exp, {x}), scalar(b, 1)})});
  const auto g = b.finish({&y, 1});
  std::vector<std::string> log;
  const auto out = passes::optimize(*g, true, &log);
  CHECK(log.size() == 9);
  CHECK(log[0].find("simplify") == 0);
  CHECK(count(*out, "exp") == 1);
  CHECK(count(*out, "mul") == 0);
  same_values(*g, *out);
}

TEST_CASE("each pass's line counts the nodes it changed, not those the passes before it left to drop") {
  // An exported GELU becomes one gelu in "recognize exported ..."; the pieces it replaced are
  // dropped later. The line of "recognize attention", which found nothing, used to claim them.
  ir::Builder b;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{3, 5});
  const ValueId plus = node(b, ir::ops::add, {node(b, ir::ops::erf, {node(b, ir::ops::div, {x, scalar(b, 1.4142135f)})}), scalar(b, 1)});
  const ValueId y = node(b, ir::ops::mul, {node(b, ir::ops::mul, {x, plus}), scalar(b, 0.5f)});
  const auto g = b.finish({&y, 1});
  std::vector<std::string> log;
  passes::optimize(*g, true, &log);
  auto counts = [&](const std::string& step) {
    const auto line = std::find_if(log.begin(), log.end(), [&](const std::string& l) { return l.rfind(step, 0) == 0; });
    REQUIRE(line != log.end());
    const size_t colon = line->find(": ", step.size()), arrow = line->find(" -> ", colon);
    return std::make_pair(std::stoi(line->substr(colon + 2)), std::stoi(line->substr(arrow + 4)));
  };
  const auto exported = counts("recognize exported"), attention = counts("recognize attention");
  CHECK(exported.first > exported.second);  // erf, add, div, two muls and their scalars: one gelu
  CHECK(attention.first == attention.second);
  CHECK(attention.first == exported.second);
}

namespace {
// ONNX Runtime's QDQ layout of a convolution: u8 images dequantized, s8 filters dequantized with
// one scale per output channel, an f32 bias, then (with `relu`) a relu, and the result quantized
// to u8 and dequantized for the graph's output.
ValueId qdq_conv(ir::Builder& b, ValueId x, bool relu, ValueId* filters = nullptr) {
  const float x_scale = 0.25f, y_scale = 0.5f;
  const uint8_t x_zero = 128, y_zero = 10;
  std::vector<int8_t> w(4 * 3 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>(i * 37 % 255) - 127);
  const float w_scale[] = {0.01f, 0.02f, 0.005f, 0.03f}, bias[] = {0.5f, -1.0f, 0.25f, 2.0f};
  const int8_t w_zero[] = {0, 0, 0, 0};
  auto f32 = [&](float v) { return b.add_constant(ir::DType::F32, ir::Shape{}, &v, 4); };
  auto u8 = [&](uint8_t v) { return b.add_constant(ir::DType::U8, ir::Shape{}, &v, 1); };
  const ValueId q = node(b, ir::ops::quantize_linear, {x, f32(x_scale), u8(x_zero)});
  const ValueId images = node(b, ir::ops::dequantize_linear, {q, f32(x_scale), u8(x_zero)});
  const ValueId wq = b.add_constant(ir::DType::I8, ir::Shape{4, 3, 3, 3}, w.data(), w.size());
  const ValueId wd = node(b, ir::ops::dequantize_linear, {wq, b.add_constant(ir::DType::F32, ir::Shape{4, 1, 1, 1}, w_scale, 16),
                                                         b.add_constant(ir::DType::I8, ir::Shape{4, 1, 1, 1}, w_zero, 4)});
  if (filters) *filters = wd;
  const int64_t pads[] = {1, 1, 1, 1};
  ValueId y = node(b, ir::ops::conv2d, {images, wd, b.add_constant(ir::DType::F32, ir::Shape{4}, bias, 16)},
                   {ir::AttrArg(), ir::AttrArg::of_ints(pads, 4)});
  if (relu) y = node(b, ir::ops::relu, {y});
  return node(b, ir::ops::dequantize_linear, {node(b, ir::ops::quantize_linear, {y, f32(y_scale), u8(y_zero)}), f32(y_scale), u8(y_zero)});
}
}  // namespace

TEST_CASE("dequantize, convolution, relu and quantize become one quantized_conv2d within one step of the QDQ graph") {
  for (const bool relu : {false, true}) {
    CAPTURE(relu);
    ir::Builder b;
    const ValueId y = qdq_conv(b, b.add_input("x", ir::DType::F32, ir::Shape{2, 3, 6, 5}), relu);
    const auto g = b.finish({&y, 1});
    const auto out = passes::optimize(*g, true, nullptr);
    CHECK(count(*out, "quantized_conv2d") == 1);
    CHECK(count(*out, "conv2d") == 0);
    CHECK(count(*out, "relu") == 0);
    CHECK(count(*out, "dequantize_linear") == 1);  // the output's: the images are read as integers
    const auto want = test::outputs(*g), got = test::outputs(*out);
    for (int64_t i = 0; i < want[0].size(); ++i) CHECK(std::fabs(eval::load_f(got[0], i) - eval::load_f(want[0], i)) <= 0.5);
  }
}

TEST_CASE("dequantized filters nothing quantized takes are folded once, not dequantized at every run") {
  ir::Builder b;
  ValueId filters = ir::kNone;
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{1, 3, 4, 4});
  const ValueId y = qdq_conv(b, x, false, &filters);
  const ValueId outs[] = {y, node(b, ir::ops::conv2d, {x, filters})};  // an f32 convolution of the same filters
  const auto g = b.finish({outs, 2});
  const auto out = passes::optimize(*g, true, nullptr);
  CHECK(count(*out, "quantized_conv2d") == 1);
  CHECK(count(*out, "conv2d") == 1);
  CHECK(count(*out, "dequantize_linear") == 1);  // the output's; the filters' is folded
  const auto want = test::outputs(*g), got = test::outputs(*out);
  CHECK(got[1].bytes == want[1].bytes);  // the f32 convolution's, exactly
}

TEST_CASE("a product of dequantized activations and dequantized constant weights runs on their integers") {
  // ONNX Runtime's QDQ layout of a Gemm: u8 activations, s8 weights with a scale and zero point
  // per column (also as [N, K] with transpose_b, parameters [N, 1]) or one of each for all, an
  // f32 bias. The sums are exact: within f32 rounding of the QDQ graph's.
  for (const bool transposed : {false, true})
    for (const bool per_column : {false, true}) {
      CAPTURE(transposed);
      CAPTURE(per_column);
      ir::Builder b;
      const int64_t k = 6, n = 5;
      std::vector<int8_t> w(k * n);
      for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>(i * 53 % 255) - 127);
      const float scales[] = {0.01f, 0.02f, 0.005f, 0.03f, 0.04f}, one = 0.015f, x_scale = 0.25f;
      const int8_t zeros[] = {1, -2, 0, 3, -1}, zero = 3;
      const uint8_t x_zero = 128;
      auto f32 = [&](float v) { return b.add_constant(ir::DType::F32, ir::Shape{}, &v, 4); };
      const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{2, 3, k});
      const ValueId xz = b.add_constant(ir::DType::U8, ir::Shape{}, &x_zero, 1);
      const ValueId images = node(b, ir::ops::dequantize_linear, {node(b, ir::ops::quantize_linear, {x, f32(x_scale), xz}), f32(x_scale), xz});
      const ir::Shape along = transposed ? ir::Shape{n, 1} : ir::Shape{n};
      const ValueId wd = node(b, ir::ops::dequantize_linear,
                              {b.add_constant(ir::DType::I8, transposed ? ir::Shape{n, k} : ir::Shape{k, n}, w.data(), w.size()),
                               per_column ? b.add_constant(ir::DType::F32, along, scales, sizeof scales) : f32(one),
                               per_column ? b.add_constant(ir::DType::I8, along, zeros, sizeof zeros)
                                          : b.add_constant(ir::DType::I8, ir::Shape{}, &zero, 1)});
      std::vector<ir::AttrArg> attrs(ir::ops::matmul.attrs.size());
      attrs[ir::MatmulAttrs::Index::transpose_b] = ir::AttrArg::of_bool(transposed);
      const ValueId y = node(b, ir::ops::add, {node(b, ir::ops::matmul, {images, wd}, attrs), f32(0.5f)});
      const auto g = b.finish({&y, 1});
      const auto out = passes::optimize(*g, true, nullptr);
      CHECK(count(*out, "matmul_integer") == 1);
      CHECK(count(*out, "matmul") == 0);
      CHECK(count(*out, "dequantize_linear") == 0);  // both read as integers
      const auto want = test::outputs(*g), got = test::outputs(*out);
      for (int64_t i = 0; i < want[0].size(); ++i) CHECK(std::fabs(eval::load_f(got[0], i) - eval::load_f(want[0], i)) <= 1e-5);
    }
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
