// The C++ DSL: expressions, scalars, scopes, names, multi-output ops, printing.
#include <doctest/doctest.h>

#include <esgraph/esgraph.hpp>

using esg::Tensor;
using Dims = std::vector<int64_t>;

TEST_CASE("expressions infer shapes and dtypes as they are written") {
  esg::GraphBuilder b("mlp");
  const int64_t batch = b.symbol("batch");
  const Tensor x = b.input("x", esg::f32, {batch, 784});
  const Tensor w = b.input("w", esg::f32, {784, 256});
  const Tensor bias = b.input("bias", esg::f32, {256});
  const Tensor h = esg::relu(esg::matmul(x, w) + bias);
  CHECK(h.dtype() == esg::f32);
  CHECK(h.shape() == Dims{batch, 256});
  CHECK(h.dim_name(0) == "batch");
  CHECK(h.dim_name(1) == "256");
  esg::Graph g = b.build({h});
  CHECK(g.node_count() == 3);
}

TEST_CASE("scalars adopt the tensor's dtype on either side") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::i32, {3});
  const Tensor y = 2 * x + 1;
  CHECK(y.dtype() == esg::i32);
  const Tensor h = b.input("h", esg::f16, {2, 2});
  CHECK((1.5 - h).dtype() == esg::f16);
  CHECK((h / 2).shape() == Dims{2, 2});
  const Tensor m = x > 0;
  CHECK(m.dtype() == esg::boolean);
  CHECK((!m).dtype() == esg::boolean);
  CHECK((-h).dtype() == esg::f16);
}

TEST_CASE("comparison and logical operators build boolean tensors") {
  esg::GraphBuilder b;
  const Tensor a = b.input("a", esg::f32, {4, 1});
  const Tensor c = b.input("c", esg::f32, {5});
  const Tensor both = (a < c) && (a != c);
  CHECK(both.shape() == Dims{4, 5});
  CHECK(both.dtype() == esg::boolean);
  CHECK(esg::where(both, a, c).shape() == Dims{4, 5});
}

TEST_CASE("options set optional attributes and inputs") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {1, 8, 32, 32});
  const Tensor w = b.input("w", esg::f32, {16, 4, 3, 3});
  const Tensor bias = b.input("b", esg::f32, {16});
  const Tensor y = esg::conv2d(x, w, esg::Conv2dOptions().bias(bias).strides({2, 2}).pads({1, 1, 1, 1}).groups(2));
  CHECK(y.shape() == Dims{1, 16, 16, 16});
  // Options objects are values: a copy keeps its own lists.
  esg::Conv2dOptions o;
  o.strides({1, 1});
  esg::Conv2dOptions copy = o;
  CHECK(esg::conv2d(x, w, copy.groups(2)).shape() == Dims{1, 16, 30, 30});
  const Tensor g = esg::gelu(x, esg::GeluOptions().approximate(esg::GeluApproximate::Tanh));
  CHECK(g.shape() == Dims{1, 8, 32, 32});
}

TEST_CASE("ops with several outputs return all of them") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {10, 4});
  const std::vector<Tensor> parts = esg::split(x, {3, 3, 4});
  REQUIRE(parts.size() == 3);
  CHECK(parts[2].shape() == Dims{4, 4});
  const Tensor joined = esg::concat(parts, 0);
  CHECK(joined.shape() == Dims{10, 4});
  CHECK(parts[1].name() == "split_0:1");
}

TEST_CASE("names, name scopes, annotations and control dependencies show in the text dump") {
  esg::GraphBuilder b("scoped");
  const Tensor x = b.input("x", esg::f32, {2});
  Tensor first = esg::exp(x);
  {
    auto scope = b.name_scope("block");
    auto note = b.annotate("stream", "1");
    auto deps = b.control_deps({first});
    Tensor y = esg::log(x).set_name("logx");
    CHECK(y.name() == "logx");
    first = y;
  }
  const Tensor z = esg::sqrt(first);
  const std::string text = b.build({z}).to_text();
  CHECK(text.find("%logx = log(%x) {@stream=\"1\"} after(exp_0)") != std::string::npos);
  CHECK(text.find("%sqrt_2 = sqrt(%logx)") != std::string::npos);
}

TEST_CASE("a transformer encoder block builds with every shape known") {
  esg::GraphBuilder b("encoder");
  const int64_t batch = b.symbol("B");
  const int64_t seq = 128, dm = 512, heads = 8, dh = 64;
  const Tensor x = b.input("x", esg::f32, {batch, seq, dm});
  auto weight = [&](const char* name, Dims shape) { return b.input(name, esg::f32, shape); };
  auto heads_of = [&](const Tensor& t) {
    return esg::transpose(esg::reshape(t, {0, 0, heads, dh}), esg::TransposeOptions().perm({0, 2, 1, 3}));
  };
  const Tensor q = heads_of(esg::matmul(x, weight("wq", {dm, dm})));
  const Tensor k = heads_of(esg::matmul(x, weight("wk", {dm, dm})));
  const Tensor v = heads_of(esg::matmul(x, weight("wv", {dm, dm})));
  const Tensor scores = esg::softmax(esg::matmul(q, k, esg::MatmulOptions().transpose_b(true)) * 0.125);
  CHECK(scores.shape() == Dims{batch, heads, seq, seq});
  const Tensor ctx = esg::reshape(esg::transpose(esg::matmul(scores, v), esg::TransposeOptions().perm({0, 2, 1, 3})), {0, 0, dm});
  const Tensor h = esg::layer_norm(x + esg::matmul(ctx, weight("wo", {dm, dm})),
                                   esg::LayerNormOptions().scale(weight("g1", {dm})).bias(weight("b1", {dm})));
  const Tensor ff = esg::matmul(esg::gelu(esg::matmul(h, weight("w1", {dm, 4 * dm}))), weight("w2", {4 * dm, dm}));
  const Tensor y = esg::layer_norm(h + ff);
  CHECK(y.shape() == Dims{batch, seq, dm});
  esg::Graph g = b.build({y});
  g.verify();
  CHECK(g.to_dot().find("digraph \"encoder\"") == 0);
}

TEST_CASE("softmax's API 2 options: a mask and a scale") {
  esg::GraphBuilder b;
  const Tensor scores = b.input("scores", esg::f32, {2, 4, 8, 8});
  const Tensor mask = b.input("mask", esg::f32, {1, 1, 8, 8});
  const Tensor p = esg::softmax(scores, esg::SoftmaxOptions().mask(mask).scale(0.125));
  CHECK(p.shape() == Dims{2, 4, 8, 8});
  CHECK_THROWS_AS(esg::softmax(mask, esg::SoftmaxOptions().mask(scores)), esg::ShapeError);
  CHECK(b.build({p}).to_text().find("softmax(%scores, %mask) {axis=-1, scale=0.125}") != std::string::npos);
}
