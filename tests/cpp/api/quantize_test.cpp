// esg::quantize from C++: a residual convolution block quantized on calibration batches runs on
// int8 convolutions, within the quantization's error of the float graph; misuse throws.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include <esgraph/esgraph.hpp>

using esg::HostTensor;
using esg::Tensor;

namespace {

// relu(conv(relu(conv(x))) + relu(conv(x))): two convolutions and a residual sum to quantize.
esg::Graph residual_block() {
  esg::GraphBuilder b("block");
  const Tensor x = b.input("x", esg::f32, {2, 8, 10, 10});
  std::vector<float> w1(8 * 8 * 9), w2(8 * 8 * 9), bias(8);
  for (size_t i = 0; i < w1.size(); ++i) w1[i] = std::sin(static_cast<float>(i) * 0.37f) * 0.2f;
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = std::cos(static_cast<float>(i) * 0.53f) * 0.15f;
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.05f * static_cast<float>(i) - 0.2f;
  const esg::Conv2dOptions same = esg::Conv2dOptions().pads({1, 1, 1, 1});
  const Tensor h = esg::relu(esg::conv2d(x, b.constant(w1, {8, 8, 3, 3}), esg::Conv2dOptions().pads({1, 1, 1, 1}).bias(b.constant(bias, {8}))));
  const Tensor y = esg::conv2d(h, b.constant(w2, {8, 8, 3, 3}), same);
  return b.build({esg::relu(y + h)});
}

HostTensor images(int seed) {
  std::vector<float> v(2 * 8 * 10 * 10);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<float>(i * (seed + 3)) * 0.11f) * 2.0f;
  return HostTensor::from(esg::f32, v, {2, 8, 10, 10});
}

}  // namespace

TEST_CASE("quantize: a residual block runs on int8 convolutions within its quantization error of the float graph") {
  const esg::Graph g = residual_block();
  const std::vector<std::vector<HostTensor>> batches{{images(0)}, {images(1)}};
  for (esg::Calibration method : {esg::Calibration::MinMax, esg::Calibration::Percentile, esg::Calibration::Entropy}) {
    esg::QuantizeOptions o;
    o.calibration = method;
    const esg::Quantized q = esg::quantize(g, batches, o);
    REQUIRE(q.layers.size() == 3);
    CHECK(q.layers[0].op == "conv2d");
    CHECK(q.layers[2].op == "add");
    for (const esg::QuantizedLayer& l : q.layers) {
      CHECK(l.quantized_result);
      CHECK(l.scale > 0);
      CHECK(l.sqnr_db > 20);
    }
    const esg::Model model = esg::compile(q.graph);
    for (const esg::Facts& conv : model.facts().rows("onednn_convolutions")) CHECK(conv.text("precision") == "int8");
    CHECK(model.stats().reference_kernels == 0);
    const std::vector<float> got = model.run({images(1)})[0].values<float>();
    const std::vector<float> want = esg::compile(g).run({images(1)})[0].values<float>();
    const float top = *std::max_element(want.begin(), want.end());
    float worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
    CHECK(worst < 0.06f * top);  // each step's rounding, a few steps of 1/255 of each range
  }
}

TEST_CASE("quantize: keep_float leaves named ops in f32; bad input throws and names what is wrong") {
  const esg::Graph g = residual_block();
  const std::vector<std::vector<HostTensor>> batches{{images(0)}};
  esg::QuantizeOptions o;
  o.keep_float = {"add"};
  CHECK(esg::quantize(g, batches, o).layers.size() == 2);
  o.keep_float = {"convolution_7"};
  CHECK_THROWS_WITH_AS(esg::quantize(g, batches, o), doctest::Contains("'convolution_7'"), esg::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(esg::quantize(g, {}), doctest::Contains("no calibration batch"), esg::InvalidArgumentError);
  o = {};
  o.bins = 16;
  CHECK_THROWS_WITH_AS(esg::quantize(g, batches, o), doctest::Contains("bins 16"), esg::InvalidArgumentError);
  const std::vector<std::vector<HostTensor>> wrong{{HostTensor::from(esg::f32, std::vector<float>(8), {2, 4})}};
  CHECK_THROWS_AS(esg::quantize(g, wrong), esg::ShapeError);
  esg::GraphBuilder b("no weights");
  const Tensor x = b.input("x", esg::f32, {4});
  CHECK_THROWS_WITH_AS(esg::quantize(b.build({esg::exp(x)}), {{HostTensor::from(esg::f32, std::vector<float>(4), {4})}}),
                       doctest::Contains("nothing to quantize"), esg::InvalidArgumentError);
}
