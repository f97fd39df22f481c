// What the pipeline makes of a graph, by the kernels it launches: fusion with epilogues,
// simplification, blocked channels, bf16 products.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include <esgraph/esgraph.hpp>


using esg::HostTensor;
using esg::Tensor;

namespace {
int64_t kernels(const esg::Graph& g, const esg::CompileOptions& o = {}) { return esg::compile(g, o).stats().launches; }
}  // namespace

TEST_CASE("kernel counts: elementwise chains fuse into one kernel") {
  {
    esg::GraphBuilder b;
    const Tensor a = b.input("a", esg::f32, {64, 32}), c = b.input("c", esg::f32, {32}), d = b.input("d", esg::f32, {64, 1});
    const esg::Graph g = b.build({a + c + d});
    CHECK(kernels(g) == 1);
    CHECK(kernels(g, esg::CompileOptions().fusion(false)) == 2);
  }
  {
    // GELU written out (the tanh approximation) is one kernel too.
    esg::GraphBuilder b;
    const Tensor x = b.input("x", esg::f32, {128});
    const Tensor y = x * 0.5f * (esg::tanh((x + x * x * x * 0.044715f) * 0.7978845608f) + 1.0f);
    CHECK(kernels(b.build({y})) == 1);
  }
  {
    esg::GraphBuilder b;
    const Tensor x = b.input("x", esg::f32, {8, 16});
    CHECK(kernels(b.build({esg::layer_norm(x)})) == 1);
    const Tensor z = b.input("z", esg::f32, {8, 16});
    CHECK(kernels(b.build({esg::softmax(z)})) == 1);
  }
  {
    // A value used both inside and after a chain escapes the group: two kernels.
    esg::GraphBuilder b;
    const Tensor x = b.input("x", esg::f32, {16});
    const Tensor e = esg::exp(x);
    const Tensor y = esg::reduce_sum(e + 1.0f);
    CHECK(kernels(b.build({y, esg::softmax(e)})) == 4);  // exp, (add), sum, softmax: exp escapes to softmax
  }
}

TEST_CASE("kernel counts: a matmul's epilogue (bias, activation, residual) joins it in one kernel") {
  // [3, 70, 48] x [48, 200]: 210 rows in blocks of 81 (two, then 48 rows), N not a multiple of the
  // 512-element chunk; the residual reads another input; the result is checked in double.
  esg::GraphBuilder b("epilogue");
  const Tensor x = b.input("x", esg::f32, {3, 70, 48}), w = b.input("w", esg::f32, {48, 200});
  const Tensor bias = b.input("bias", esg::f32, {200}), r = b.input("r", esg::f32, {3, 70, 200});
  const Tensor y = esg::relu(esg::matmul(x, w) + bias) + r;
  const esg::Graph g = b.build({y});
  CHECK(kernels(g) == 1);
  CHECK(kernels(g, esg::CompileOptions().fusion(false)) == 4);
  std::vector<float> xs(3 * 70 * 48), ws(48 * 200), bs(200), rs(3 * 70 * 200);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(static_cast<float>(i) * 0.37f);
  for (size_t i = 0; i < ws.size(); ++i) ws[i] = std::cos(static_cast<float>(i) * 0.11f) * 0.2f;
  for (size_t i = 0; i < bs.size(); ++i) bs[i] = std::sin(static_cast<float>(i)) * 0.5f;
  for (size_t i = 0; i < rs.size(); ++i) rs[i] = std::cos(static_cast<float>(i) * 0.01f);
  const std::vector<HostTensor> in{HostTensor::from(esg::f32, xs, {3, 70, 48}), HostTensor::from(esg::f32, ws, {48, 200}),
                                   HostTensor::from(esg::f32, bs, {200}), HostTensor::from(esg::f32, rs, {3, 70, 200})};
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    const std::vector<float> got = esg::compile(g, esg::CompileOptions().threads(threads)).run(in)[0].values<float>();
    double worst = 0;
    for (size_t row = 0; row < 210; ++row)
      for (size_t col = 0; col < 200; ++col) {
        double acc = bs[col];
        for (size_t k = 0; k < 48; ++k) acc += static_cast<double>(xs[row * 48 + k]) * ws[k * 200 + col];
        const double want = std::max(acc, 0.0) + rs[row * 200 + col];
        worst = std::max(worst, std::fabs(got[row * 200 + col] - want) / (1 + std::fabs(want)));
      }
    CHECK(worst < 1e-5);
  }
  // The head reads B whole for every block of rows: B must not be overwritten in place by the
  // group's output even where it dies there and has the output's shape (two blocks of 64 rows).
  {
    esg::GraphBuilder b3("b in place");
    const Tensor p = b3.input("p", esg::f32, {128, 128}), v_in = b3.input("v", esg::f32, {128, 256});
    const Tensor y3 = esg::matmul(p, esg::relu(v_in)) * 2.0f;
    const esg::Graph g3 = b3.build({esg::matmul(p, y3)});
    std::vector<float> ps(128 * 128), vs(128 * 256);
    for (size_t i = 0; i < ps.size(); ++i) ps[i] = std::sin(static_cast<float>(i) * 0.7f) * 0.1f;
    for (size_t i = 0; i < vs.size(); ++i) vs[i] = std::cos(static_cast<float>(i) * 0.3f);
    const std::vector<HostTensor> in3{HostTensor::from(esg::f32, ps, {128, 128}), HostTensor::from(esg::f32, vs, {128, 256})};
    const std::vector<float> fused = esg::compile(g3).run(in3)[0].values<float>();
    const std::vector<float> plain = esg::compile(g3, esg::CompileOptions().fusion(false)).run(in3)[0].values<float>();
    double worst = 0;
    for (size_t i = 0; i < fused.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(fused[i]) - plain[i]) / (1 + std::fabs(plain[i])));
    CHECK(worst < 1e-5);
  }
  // A matmul whose result is also used elsewhere stays a kernel of its own.
  esg::GraphBuilder b2("shared");
  const Tensor x2 = b2.input("x", esg::f32, {8, 8});
  const Tensor m = esg::matmul(x2, x2);
  CHECK(kernels(b2.build({esg::relu(m + 1.0f), m})) == 2);
}

TEST_CASE("kernel counts: a convolution's epilogue (bias, per-channel affine, activation, residual) joins it") {
  // Three images of 7 x 20 x 20 results: several 512-element chunks per image, a per-channel
  // scale broadcast over each image's rows; checked against a direct convolution in double.
  esg::GraphBuilder b("conv epilogue");
  const Tensor x = b.input("x", esg::f32, {3, 5, 20, 20}), w = b.input("w", esg::f32, {7, 5, 3, 3});
  const Tensor bias = b.input("bias", esg::f32, {7}), scale = b.input("scale", esg::f32, {7, 1, 1});
  const Tensor r = b.input("r", esg::f32, {3, 7, 20, 20});
  const Tensor conv = esg::conv2d(x, w, esg::Conv2dOptions().bias(bias).pads({1, 1, 1, 1}));
  const esg::Graph g = b.build({esg::relu(conv * scale + 0.25f) + r});
  CHECK(kernels(g) == 1);
  // Unfused and row-major (blocked, the [7, 1, 1] scale would need the convolution's result reordered).
  CHECK(kernels(g, esg::CompileOptions().fusion(false).backend_option("channel_block", 0)) == 5);
  std::vector<float> xs(3 * 5 * 400), ws(7 * 5 * 9), bs(7), ss(7), rs(3 * 7 * 400);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(static_cast<float>(i) * 0.37f);
  for (size_t i = 0; i < ws.size(); ++i) ws[i] = std::cos(static_cast<float>(i) * 0.11f) * 0.2f;
  for (size_t i = 0; i < bs.size(); ++i) bs[i] = std::sin(static_cast<float>(i)) * 0.5f, ss[i] = 0.5f + static_cast<float>(i) * 0.1f;
  for (size_t i = 0; i < rs.size(); ++i) rs[i] = std::cos(static_cast<float>(i) * 0.01f);
  const std::vector<HostTensor> in{HostTensor::from(esg::f32, xs, {3, 5, 20, 20}), HostTensor::from(esg::f32, ws, {7, 5, 3, 3}),
                                   HostTensor::from(esg::f32, bs, {7}), HostTensor::from(esg::f32, ss, {7, 1, 1}),
                                   HostTensor::from(esg::f32, rs, {3, 7, 20, 20})};
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    const std::vector<float> got = esg::compile(g, esg::CompileOptions().threads(threads)).run(in)[0].values<float>();
    double worst = 0;
    for (int n = 0; n < 3; ++n)
      for (int o = 0; o < 7; ++o)
        for (int i = 0; i < 20; ++i)
          for (int j = 0; j < 20; ++j) {
            double acc = bs[o];
            for (int c = 0; c < 5; ++c)
              for (int kh = 0; kh < 3; ++kh)
                for (int kw = 0; kw < 3; ++kw) {
                  const int ih = i + kh - 1, iw = j + kw - 1;
                  if (ih >= 0 && ih < 20 && iw >= 0 && iw < 20)
                    acc += static_cast<double>(xs[((n * 5 + c) * 20 + ih) * 20 + iw]) * ws[((o * 5 + c) * 3 + kh) * 3 + kw];
                }
            const size_t at = ((static_cast<size_t>(n) * 7 + o) * 20 + i) * 20 + j;
            const double want = std::max(acc * ss[o] + 0.25, 0.0) + rs[at];
            worst = std::max(worst, std::fabs(got[at] - want) / (1 + std::fabs(want)));
          }
    CHECK(worst < 1e-5);
  }
}

TEST_CASE("fused and unfused runs give the same bytes") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {33, 17}), w = b.input("w", esg::f32, {17});
  const Tensor i = b.input("i", esg::i32, {33, 1});
  const Tensor y = esg::sigmoid(x * w - 0.25f) * esg::cast(esg::abs(i * 3 - 7), esg::f32) + esg::exp(-x);
  const esg::Graph g = b.build({y, esg::maximum(i, i * i - 5)});
  std::vector<float> xs(33 * 17), ws(17);
  std::vector<int32_t> is(33);
  for (size_t k = 0; k < xs.size(); ++k) xs[k] = std::sin(static_cast<float>(k)) * 2;
  for (size_t k = 0; k < ws.size(); ++k) ws[k] = std::cos(static_cast<float>(k));
  for (size_t k = 0; k < is.size(); ++k) is[k] = static_cast<int32_t>(k) - 16;
  const std::vector<HostTensor> in{HostTensor::from(esg::f32, xs, {33, 17}), HostTensor::from(esg::f32, ws, {17}),
                                   HostTensor::from(esg::i32, is, {33, 1})};
  const auto fused = esg::compile(g).run(in);
  const auto plain = esg::compile(g, esg::CompileOptions().fusion(false)).run(in);
  CHECK(fused[0].values<float>() == plain[0].values<float>());
  CHECK(fused[1].values<int32_t>() == plain[1].values<int32_t>());
  CHECK(kernels(g) < kernels(g, esg::CompileOptions().fusion(false)));
}

namespace {
// scores[0, h, i, j] = sum_d q[0, h, i, d] * k[0, j, h, d] for q [1, 2, 3, 4] and k [1, 5, 2, 4]:
// attention scores with K in [batch, length, heads, depth] order, as exporters write them.
std::vector<float> attention_scores(const std::vector<float>& q, const std::vector<float>& k) {
  std::vector<float> s(30, 0.0f);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 5; ++j)
        for (int d = 0; d < 4; ++d)
          s[static_cast<size_t>(h * 15 + i * 5 + j)] += q[static_cast<size_t>(h * 12 + i * 4 + d)] * k[static_cast<size_t>(j * 8 + h * 4 + d)];
  return s;
}
}  // namespace

TEST_CASE("simplification: a transposed matmul operand becomes a flag, x**2 a multiply; trailing reductions have CPU kernels") {
  // q [2,3,4] times k^T where k arrives as [2,4,3] transposed by {0,2,1}: one kernel, the GEMM
  // reading k in place.
  esg::GraphBuilder b;
  const Tensor q = b.input("q", esg::f32, {2, 3, 4}), k = b.input("k", esg::f32, {2, 5, 4});
  const Tensor y = esg::matmul(q, esg::transpose(k, esg::TransposeOptions().perm({0, 2, 1})));
  // [N, L, H, D] -> {0, 2, 3, 1} is the K^T of exported attention: a row-moving transpose remains.
  const Tensor k4 = b.input("k4", esg::f32, {1, 5, 2, 4}), q4 = b.input("q4", esg::f32, {1, 2, 3, 4});
  const Tensor scores = esg::matmul(q4, esg::transpose(k4, esg::TransposeOptions().perm({0, 2, 3, 1})));
  const Tensor sq = esg::pow(q, b.constant({2.0f}, {}));
  const Tensor mean_last = esg::reduce_mean(k, esg::ReduceMeanOptions().axes({-1}).keepdims(true));
  const Tensor sum_two = esg::reduce_sum(k4, esg::ReduceSumOptions().axes({3, 2}));
  const esg::Graph g = b.build({y, scores, sq, mean_last, sum_two});
  const esg::Model m = esg::compile(g);
  const esg::Facts facts = m.facts();
  for (const esg::Facts& group : facts.rows("groups")) CHECK(group.text("ops").find("pow") == std::string::npos);
  CHECK(facts.rows("reference_ops").empty());  // k4's row shuffle is the one transpose left: fast
  CHECK(m.stats().reference_kernels == 0);

  std::vector<float> qv(24), kv(40), k4v(40), q4v(24);
  for (size_t i = 0; i < qv.size(); ++i) qv[i] = static_cast<float>(i % 7) - 3, q4v[i] = static_cast<float>(i % 5) - 2;
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = static_cast<float>(i % 9) - 4, k4v[i] = static_cast<float>(i % 4) - 1;
  const auto out = m.run({HostTensor::from(esg::f32, qv, {2, 3, 4}), HostTensor::from(esg::f32, kv, {2, 5, 4}),
                          HostTensor::from(esg::f32, k4v, {1, 5, 2, 4}), HostTensor::from(esg::f32, q4v, {1, 2, 3, 4})});
  const std::vector<float> yv = out[0].values<float>(), sv = out[1].values<float>(), sqv = out[2].values<float>(),
                           mv = out[3].values<float>(), tv = out[4].values<float>();
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 5; ++j) {
        float want = 0;
        for (int d = 0; d < 4; ++d) want += qv[static_cast<size_t>(n * 12 + i * 4 + d)] * kv[static_cast<size_t>(n * 20 + j * 4 + d)];
        CHECK(yv[static_cast<size_t>(n * 15 + i * 5 + j)] == want);
      }
  CHECK(sv == attention_scores(q4v, k4v));
  for (size_t i = 0; i < qv.size(); ++i) CHECK(sqv[i] == qv[i] * qv[i]);
  for (size_t r = 0; r < 10; ++r)
    CHECK(mv[r] == doctest::Approx((kv[r * 4] + kv[r * 4 + 1] + kv[r * 4 + 2] + kv[r * 4 + 3]) / 4));
  for (size_t r = 0; r < 5; ++r) {
    float want = 0;
    for (size_t j = 0; j < 8; ++j) want += k4v[r * 8 + j];
    CHECK(tv[r] == want);
  }
}

TEST_CASE("simplification: a transpose read elsewhere too is not split into a second, partial copy") {
  esg::GraphBuilder b;
  const Tensor k4 = b.input("k4", esg::f32, {1, 5, 2, 4}), q4 = b.input("q4", esg::f32, {1, 2, 3, 4});
  const Tensor kt = esg::transpose(k4, esg::TransposeOptions().perm({0, 2, 3, 1}));
  const esg::Model m = esg::compile(b.build({esg::matmul(q4, kt), kt}));
  CHECK(m.stats().launches == 2);  // the transpose, once, and the product reading it
  CHECK(m.stats().fast_kernels == 2);
  std::vector<float> kv(40), qv(24);
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = static_cast<float>(i % 4) - 1;
  for (size_t i = 0; i < qv.size(); ++i) qv[i] = static_cast<float>(i % 5) - 2;
  const auto out = m.run({HostTensor::from(esg::f32, kv, {1, 5, 2, 4}), HostTensor::from(esg::f32, qv, {1, 2, 3, 4})});
  CHECK(out[0].values<float>() == attention_scores(qv, kv));
}

TEST_CASE("simplification: a transpose that moves only size-1 axes is a reshape, merged with the reshape before it") {
  esg::GraphBuilder b;
  const Tensor x = b.input("x", esg::f32, {1, 1, 8});
  // How attention splits the heads of one token: [1,1,8] -> [1,1,2,4] -> [1,2,1,4].
  const Tensor heads = esg::transpose(esg::reshape(x, {1, 1, 2, 4}), esg::TransposeOptions().perm({0, 2, 1, 3}));
  // A transpose that reorders two axes longer than 1 moves elements and stays.
  const Tensor swapped = esg::transpose(esg::reshape(x, {2, 4}), esg::TransposeOptions().perm({1, 0}));
  const esg::Model m = esg::compile(b.build({heads, swapped}));
  // The first reshape is an output (a copy into the caller's buffer); the second is a view of x.
  const esg::Facts facts = m.facts();
  const std::vector<esg::Facts> slow = facts.rows("reference_ops");
  REQUIRE(slow.size() == 1);
  CHECK(slow[0].text("op") == "reshape");
  CHECK(slow[0].number("count") == 1);
  CHECK(facts.number("launches") == 2);  // the reshape into the output, the transpose
  CHECK(facts.number("views") == 1);
  std::vector<float> xv(8);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i);
  const auto out = m.run({HostTensor::from(esg::f32, xv, {1, 1, 8})});
  CHECK(out[0].shape() == std::vector<int64_t>{1, 2, 1, 4});
  CHECK(out[0].values<float>() == xv);  // the same elements in the same order
  CHECK(out[1].values<float>() == std::vector<float>{0, 4, 1, 5, 2, 6, 3, 7});
}

TEST_CASE("blocked channels: pools and the elementwise chain between them stay blocked, reordered at the ends only") {
  esg::GraphBuilder b("pools");
  const Tensor x = b.input("x", esg::f32, {2, 12, 9, 9});  // 12 channels: the second block of 8 is half padding
  Tensor y = esg::max_pool2d(x, {2, 2}, esg::MaxPool2dOptions().strides({2, 2}));
  y = esg::relu(y * b.constant({0.5f}, {}) - b.constant({0.25f}, {}));
  y = esg::avg_pool2d(y, {3, 3}, esg::AvgPool2dOptions().pads({1, 1, 1, 1}));
  const Tensor z = esg::max_pool2d(esg::tanh(y), {2, 2});
  std::vector<float> xv(2 * 12 * 9 * 9);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 37) % 101) / 25.0f - 2.0f;
  const std::vector<HostTensor> in = {HostTensor::from(esg::f32, xv, {2, 12, 9, 9})};
  const esg::Graph chain = b.build({z});
  const esg::Model plain = esg::compile(chain, esg::CompileOptions().backend_option("channel_block", 0));
  const std::vector<float> want = plain.run(in)[0].values<float>();
  for (int block : {8, 16}) {
    CAPTURE(block);
    const esg::Model blocked = esg::compile(chain, esg::CompileOptions().backend_option("channel_block", block));
    const esg_model_stats s = blocked.stats();
    CHECK(s.reorders == 2);  // into the blocked format before the first pool, back for the output
    CHECK(s.launches == plain.stats().launches + 2);
    CHECK(s.lower_bound_bytes > plain.stats().lower_bound_bytes);  // 12 channels held as 16
    CHECK(blocked.run(in)[0].values<float>() == want);  // the same math on every element, bit for bit
    const std::vector<esg::Facts> formats = blocked.facts().rows("blocked_values");
    REQUIRE(formats.size() == 1);
    CHECK(formats[0].text("format") == (block == 8 ? "nChw8c" : "nChw16c"));
  }
  CHECK(plain.stats().reorders == 0);
  CHECK_THROWS_AS(esg::compile(chain, esg::CompileOptions().backend_option("channel_block", 12)), esg::InvalidArgumentError);
  CHECK_THROWS_AS(esg::compile(chain, esg::CompileOptions().backend_option("channel_block", 32)), esg::InvalidArgumentError);
}

TEST_CASE("blocked channels: row-major readers of a blocked value share one reorder") {
  esg::GraphBuilder b("readers");
  const Tensor x = b.input("x", esg::f32, {1, 5, 6, 6});
  const Tensor p = esg::max_pool2d(x, {2, 2}, esg::MaxPool2dOptions().strides({2, 2}));
  const Tensor e = esg::exp(p);
  // e is an output (row-major for the caller), read by a softmax over the channels (a row-major
  // kernel) and by another pool (blocked): the softmax reads the output's row-major copy.
  const esg::Graph g = b.build({e, esg::softmax(e, esg::SoftmaxOptions().axis(1)), esg::avg_pool2d(e, {3, 3})});
  std::vector<float> xv(5 * 36);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(static_cast<float>(i));
  const std::vector<HostTensor> in = {HostTensor::from(esg::f32, xv, {1, 5, 6, 6})};
  const esg::Model blocked = esg::compile(g, esg::CompileOptions().backend_option("channel_block", 8));
  CHECK(blocked.stats().reorders == 3);  // x in; e out (the softmax reads it there); the last pool's result out
  const auto got = blocked.run(in), want = esg::compile(g).run(in);
  for (size_t o = 0; o < 3; ++o) CHECK(got[o].values<float>() == want[o].values<float>());
}

TEST_CASE("precision bf16: convolutions multiply bfloat16, within its rounding of f32; unknown precisions are refused") {
  esg::GraphBuilder b("conv");
  const Tensor x = b.input("x", esg::f32, {1, 16, 12, 12});
  std::vector<float> w(32 * 16 * 9);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i) * 0.7f) * 0.1f;
  const esg::Graph g = b.build({esg::relu(esg::conv2d(x, b.constant(w, {32, 16, 3, 3}), esg::Conv2dOptions().pads({1, 1, 1, 1})))});
  CHECK_THROWS_WITH_AS(esg::compile(g, esg::CompileOptions().precision("f16")), doctest::Contains("precision 'f16'"),
                       esg::InvalidArgumentError);
  if (!__builtin_cpu_supports("avx512bf16")) {
    CHECK_THROWS_AS(esg::compile(g, esg::CompileOptions().precision("bf16")), esg::UnsupportedError);
    return;
  }
  std::vector<float> xs(16 * 144);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::cos(static_cast<float>(i) * 0.3f);
  const std::vector<HostTensor> in{HostTensor::from(esg::f32, xs, {1, 16, 12, 12})};
  const esg::Model exact = esg::compile(g), rounded = esg::compile(g, esg::CompileOptions().precision("bf16"));
  const std::vector<float> a = exact.run(in)[0].values<float>(), r = rounded.run(in)[0].values<float>();
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - r[i]));
  CHECK(worst > 0);  // rounded, not f32
  // Each of 144 products of |x| <= 1 and |w| <= 0.1, both rounded to 8 bits: at most 2·2^-8 of 0.1 off.
  CHECK(worst <= 144 * 2 * 0.1f / 256);
  const std::vector<esg::Facts> convolutions = rounded.facts().rows("onednn_convolutions");
  REQUIRE(convolutions.size() == 1);
  CHECK(convolutions[0].text("precision") == "bf16");
  CHECK(exact.facts().rows("onednn_convolutions").at(0).text("precision") == "f32");
}

TEST_CASE("matmul_nbits: 4-bit and 8-bit weights in blocks with their scales and zero points, against a double-precision sum") {
  // K = 100: three full blocks of 32 and one of 4; N = 7 columns: a group of 4 and 3 alone;
  // M = 3 rows: the kernel's 3-row tile.
  const int64_t m = 3, k = 100, n = 7, block = 32, blocks = 4;
  std::vector<float> a(m * k), scales(n * blocks);
  std::vector<uint8_t> zero_points(n * blocks);
  for (int64_t i = 0; i < m * k; ++i) a[i] = static_cast<float>((i * 7) % 23) * 0.125f - 1.375f;
  for (int64_t i = 0; i < n * blocks; ++i) scales[i] = 0.01f * static_cast<float>(i % 5 + 1);
  for (const int64_t bits : {int64_t{4}, int64_t{8}}) {
    CAPTURE(bits);
    const int64_t top = (int64_t{1} << bits) - 1, per_byte = 8 / bits;
    for (int64_t i = 0; i < n * blocks; ++i) zero_points[i] = static_cast<uint8_t>((i * 3) % (top + 1));
    // codes[j][p] = (j · 5 + p · 3) mod 2^bits along K, packed low bits first, 0 past K
    const auto code = [&](int64_t j, int64_t p) { return p < k ? (j * 5 + p * 3) % (top + 1) : 0; };
    std::vector<uint8_t> packed(n * blocks * block / per_byte, 0);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < blocks * block; ++p)
        packed[(j * blocks * block + p) / per_byte] |= static_cast<uint8_t>(code(j, p) << (p % per_byte * bits));
    esg::GraphBuilder b;
    const Tensor x = b.input("a", esg::f32, {m, k});
    const Tensor y = esg::matmul_nbits(x, b.constant(esg::u8, {n, blocks, block / per_byte}, packed.data(), packed.size()),
                                       b.constant(esg::f32, {n, blocks}, scales.data(), scales.size() * sizeof(float)),
                                       esg::MatmulNbitsOptions().bits(bits).block_size(block).zero_points(
                                           b.constant(esg::u8, {n, blocks}, zero_points.data(), zero_points.size())));
    const esg::Model model = esg::compile(b.build({y}));
    const std::vector<float> got = model.run({HostTensor::from(esg::f32, a, {m, k})})[0].values<float>();
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += double{a[i * k + p]} * (code(j, p) - zero_points[j * blocks + p / block]) * double{scales[j * blocks + p / block]};
        CHECK(got[i * n + j] == doctest::Approx(sum).epsilon(1e-5));
      }
    CHECK(model.facts().number("reference_kernels") == 0);
    // accuracy_level 4 lets the kernel round a's rows to int8, 32 values to a scale s: each
    // value moves by at most s / 2, each sum by at most that times its piece's sum of |w|.
    esg::GraphBuilder level4;
    const Tensor rounded = esg::matmul_nbits(
        level4.input("a", esg::f32, {m, k}), level4.constant(esg::u8, {n, blocks, block / per_byte}, packed.data(), packed.size()),
        level4.constant(esg::f32, {n, blocks}, scales.data(), scales.size() * sizeof(float)),
        esg::MatmulNbitsOptions().bits(bits).block_size(block).accuracy_level(4).zero_points(
            level4.constant(esg::u8, {n, blocks}, zero_points.data(), zero_points.size())));
    const std::vector<float> near = esg::compile(level4.build({rounded})).run({HostTensor::from(esg::f32, a, {m, k})})[0].values<float>();
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0, bound = 0;
        for (int64_t piece = 0; piece * 32 < k; ++piece) {
          double largest = 0, weights = 0;
          for (int64_t p = piece * 32; p < std::min(k, piece * 32 + 32); ++p) {
            const double w = (code(j, p) - zero_points[j * blocks + p / block]) * double{scales[j * blocks + p / block]};
            sum += double{a[i * k + p]} * w;
            largest = std::max(largest, std::abs(double{a[i * k + p]}));
            weights += std::abs(w);
          }
          bound += largest / 127 / 2 * weights;
        }
        CHECK(std::abs(near[i * n + j] - sum) <= bound + 1e-5 * std::abs(sum));
      }
  }
  // b's shape follows from K, bits and the block size.
  esg::GraphBuilder bad;
  const std::vector<uint8_t> codes(n * blocks * 16, 0);
  CHECK_THROWS_WITH_AS(esg::matmul_nbits(bad.input("a", esg::f32, {m, k}), bad.constant(esg::u8, {n, blocks, 8}, codes.data(), codes.size() / 2),
                                         bad.constant(esg::f32, {n, blocks}, scales.data(), scales.size() * sizeof(float))),
                       doctest::Contains("`b` must be [7,4,16] for K = 100, 4 bits and blocks of 32, got [7,4,8]"), esg::ShapeError);
}

TEST_CASE("matmul_integer: u8 rows times constant s8 weights sum exactly on the integer GEMM, with zero points per row and column") {
  // 255 · -128 twice overflows 16 bits, where u8 x s8 kernels without VNNI saturate; the sums
  // are checked against int64 arithmetic here.
  const int64_t m = 5, k = 40, n = 30;
  std::vector<uint8_t> a(m * k);
  std::vector<int8_t> w(k * n), w_zero(n);
  std::vector<uint8_t> a_zero(m);
  for (int64_t i = 0; i < m * k; ++i) a[i] = static_cast<uint8_t>(i % 3 == 0 ? 255 : (i * 37) % 256);
  for (int64_t i = 0; i < k * n; ++i) w[i] = static_cast<int8_t>(i % 2 == 0 ? -128 : (i * 11) % 256 - 128);
  for (int64_t j = 0; j < n; ++j) w_zero[j] = static_cast<int8_t>(j % 5 - 2);
  for (int64_t i = 0; i < m; ++i) a_zero[i] = static_cast<uint8_t>(i * 3);
  esg::GraphBuilder b;
  const Tensor x = b.input("a", esg::u8, {m, k}), zero = b.input("a_zero", esg::u8, {m});
  const Tensor y = esg::matmul_integer(x, b.constant(esg::i8, {k, n}, w.data(), w.size()), zero,
                                       b.constant(esg::i8, {n}, w_zero.data(), w_zero.size()));
  const esg::Model model = esg::compile(b.build({y}));
  const std::vector<int32_t> got =
      model.run({HostTensor::from(esg::u8, a, {m, k}), HostTensor::from(esg::u8, a_zero, {m})})[0].values<int32_t>();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += (int64_t{a[i * k + p]} - a_zero[i]) * (int64_t{w[p * n + j]} - w_zero[j]);
      CHECK(got[i * n + j] == sum);
    }
  CHECK(model.facts().number("integer_matmuls") == 1);
  // Zero points must hold one value or one per row (of a) / column (of b).
  esg::GraphBuilder bad;
  const Tensor bx = bad.input("a", esg::u8, {m, k});
  CHECK_THROWS_AS(esg::matmul_integer(bx, bad.constant(esg::i8, {k, n}, w.data(), w.size()), bad.input("z", esg::u8, {m + 1}),
                                      bad.constant(esg::i8, {}, w_zero.data(), 1)),
                  esg::ShapeError);
}
