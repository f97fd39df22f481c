// The quantize layer's parts on their own: the calibration arithmetic against values worked out
// by hand or by sorting, the weights' codes, the sites a graph offers, and the QDQ rewrite.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "ir/error.hpp"
#include "ir/ops.gen.hpp"
#include "ir_build.hpp"
#include "quantize/calibration.hpp"
#include "quantize/qdq.hpp"
#include "quantize/sites.hpp"

namespace {

using esg::ir::ValueId;
using esg::quantize::Method;
using esg::quantize::Observer;
using esg::quantize::Range;
using esg::test::node;
namespace ir = esg::ir;

Observer observed(const std::vector<float>& x, int64_t bins) {
  Observer o;
  o.observe_extremes(x.data(), static_cast<int64_t>(x.size()));
  o.start_histogram(bins);
  o.observe_histogram(x.data(), static_cast<int64_t>(x.size()));
  return o;
}

std::vector<float> normal(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = d(gen);
  return x;
}

size_t count(const ir::Graph& g, const char* op) {
  return static_cast<size_t>(std::count_if(g.nodes.begin(), g.nodes.end(), [&](const ir::Node& n) { return std::string(n.op->name) == op; }));
}

}  // namespace

TEST_CASE("min-max takes the extremes, 0 included; NaN and infinities are not values") {
  const float x[] = {0.5f, 2.0f, NAN, INFINITY, 1.0f, -INFINITY};
  Observer o;
  o.observe_extremes(x, 6);
  const Range r = o.choose(Method::MinMax, 100, false);
  CHECK(r.lo == 0.0);  // the range holds 0, which every zero padding needs exactly
  CHECK(r.hi == 2.0);
  const Range s = o.choose(Method::MinMax, 100, true);
  CHECK(s.lo == -2.0);
  CHECK(s.hi == 2.0);
}

TEST_CASE("percentile cuts each tail's share, within a bin of the sorted values' quantile") {
  std::vector<float> x = normal(200000, 1);
  const Observer o = observed(x, 2048);
  std::vector<float> sorted = x;
  std::sort(sorted.begin(), sorted.end());
  const double width = std::max(-sorted.front(), sorted.back()) / 2048;
  const Range r = o.choose(Method::Percentile, 99.0, false);  // 0.5% beyond each side
  CHECK(std::fabs(r.hi - sorted[static_cast<size_t>(0.995 * x.size())]) <= 2 * width);
  CHECK(std::fabs(r.lo - sorted[static_cast<size_t>(0.005 * x.size())]) <= 2 * width);
  std::vector<float> magnitudes(x.size());
  std::transform(x.begin(), x.end(), magnitudes.begin(), [](float v) { return std::fabs(v); });
  std::sort(magnitudes.begin(), magnitudes.end());
  const Range s = o.choose(Method::Percentile, 99.0, true);
  CHECK(std::fabs(s.hi - magnitudes[static_cast<size_t>(0.99 * x.size())]) <= 2 * width);
  CHECK(s.lo == -s.hi);
  CHECK(o.choose(Method::Percentile, 100, false).hi == doctest::Approx(sorted.back()));
}

TEST_CASE("entropy clips rare outliers that min-max would spread the codes over") {
  std::vector<float> x = normal(100000, 2);
  for (int i = 0; i < 10; ++i) x[static_cast<size_t>(i)] = 60.0f;  // 0.01% far out
  const Observer o = observed(x, 2048);
  const Range minmax = o.choose(Method::MinMax, 100, false);
  const Range entropy = o.choose(Method::Entropy, 100, false);
  CHECK(minmax.hi == 60.0);
  CHECK(entropy.hi < 15.0);  // the Gaussian's bulk (|x| < 5) kept, the outliers saturated
  CHECK(entropy.hi > 3.0);
  CHECK(entropy.lo < -3.0);
  // Data with no outliers keeps (nearly) all of its range.
  std::vector<float> uniform(100000);
  for (size_t i = 0; i < uniform.size(); ++i) uniform[i] = static_cast<float>(i) / uniform.size();
  const Range u = observed(uniform, 2048).choose(Method::Entropy, 100, false);
  CHECK(u.lo == 0.0);
  CHECK(u.hi > 0.9);
}

TEST_CASE("a range's scale and zero point: u8 over [lo, hi], i8 around 0, a zero range scale 1") {
  const auto a = esg::quantize::quantization_of({-1.0, 3.0}, false);
  CHECK(a.scale == doctest::Approx(4.0 / 255));
  CHECK(a.zero_point == 64);  // round(1 / (4 / 255)) = round(63.75)
  CHECK_FALSE(a.is_signed);
  const auto s = esg::quantize::quantization_of({-1.0, 3.0}, true);
  CHECK(s.scale == doctest::Approx(3.0 / 127));
  CHECK(s.zero_point == 0);
  CHECK(s.is_signed);
  const auto z = esg::quantize::quantization_of({0.0, 0.0}, false);
  CHECK(z.scale == 1.0f);
  CHECK(z.zero_point == 0);
}

TEST_CASE("weights: symmetric s8 codes, a scale per output channel or one, ties to even") {
  // Two output channels along axis 1 of a [K=2, N=2] matrix: column 0 peaks at 127, column 1 at 2.54.
  const float w[] = {127.0f, 2.54f, -0.5f, 0.01f};
  const auto per_channel = esg::quantize::quantize_weights(w, ir::Shape{2, 2}, 1, true);
  REQUIRE(per_channel.scales.size() == 2);
  CHECK(per_channel.scales[0] == 1.0f);
  CHECK(per_channel.scales[1] == doctest::Approx(0.02f));
  CHECK(per_channel.codes == std::vector<int8_t>{127, 127, 0, 0});  // -0.5 ties to even 0; 0.01 / 0.02 = 0.5 to 0
  const auto one = esg::quantize::quantize_weights(w, ir::Shape{2, 2}, 1, false);
  REQUIRE(one.scales.size() == 1);
  CHECK(one.codes == std::vector<int8_t>{127, 3, 0, 0});  // 2.54 -> 2.54, rounded to 3
  const float zeros[] = {0.0f, 0.0f};
  CHECK(esg::quantize::quantize_weights(zeros, ir::Shape{2}, 0, true).scales == std::vector<float>{1.0f, 1.0f});
}

TEST_CASE("sites: convolutions past their relu, products, sums of quantized values, max pools; keep_float by name and op") {
  ir::Builder b("net");
  const ValueId x = b.add_input("x", ir::DType::F32, ir::Shape{1, 2, 8, 8});
  const std::vector<float> filters(2 * 2 * 3 * 3, 0.1f);
  auto conv = [&](ValueId in) {
    const ValueId w = b.add_constant(ir::DType::F32, ir::Shape{2, 2, 3, 3}, filters.data(), filters.size() * 4);
    const int64_t pads[] = {1, 1, 1, 1};
    return node(b, ir::ops::conv2d, {in, w, ir::kNone}, {ir::AttrArg(), ir::AttrArg::of_ints(pads, 4)});
  };
  const ValueId c1 = node(b, ir::ops::relu, {conv(x)});
  const ValueId c2 = conv(c1);
  const ValueId sum = node(b, ir::ops::add, {c1, c2});
  const ValueId tail = node(b, ir::ops::mul, {sum, sum});  // not a site
  const std::unique_ptr<ir::Graph> g = b.finish({&tail, 1});

  const esg::quantize::Sites s = esg::quantize::find_sites(*g, {});
  REQUIRE(s.ops.size() == 3);
  CHECK(std::string(g->nodes[s.ops[0].node].op->name) == "conv2d");
  CHECK(s.ops[0].result == c1);  // past the relu only it reads
  CHECK(std::string(g->nodes[s.ops[2].node].op->name) == "add");
  CHECK(s.ops[2].inputs == std::vector<ValueId>{c1, c2});
  CHECK(s.calibrated == std::vector<ValueId>{x, c1, c2, sum});

  CHECK(esg::quantize::find_sites(*g, {"add"}).ops.size() == 2);
  CHECK(esg::quantize::find_sites(*g, {g->node_name(s.ops[1].node)}).ops.size() == 1);  // the sum's operand stays f32, so the sum too
  CHECK_THROWS_WITH_AS(esg::quantize::find_sites(*g, {"conv_9"}), doctest::Contains("keep_float names 'conv_9'"), ir::Error);

  // The rewrite: the QDQ form, weights as s8 codes.
  std::unordered_map<ValueId, esg::quantize::Quantization> params;
  for (ValueId v : s.calibrated) params[v] = esg::quantize::quantization_of({0.0, 4.0}, false);
  const esg::quantize::Rewritten r = esg::quantize::insert_qdq(*g, s, params, true);
  CHECK(count(*r.graph, "quantize_linear") == 4);
  CHECK(count(*r.graph, "dequantize_linear") == 4 + 2);  // each activation once, each filter once
  CHECK(count(*r.graph, "conv2d") == 2);
  CHECK(r.value_of.size() == 3);
}
