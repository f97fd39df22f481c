// Graphs and values the C++ API suites share (model_test, model_kernels_test, model_threads_test).
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include <esgraph/esgraph.hpp>

namespace api_test {

// y = relu(x @ w + b) with small integers, so the expected values are exact.
inline esg::Graph mlp(bool symbolic) {
  esg::GraphBuilder b("mlp");
  const esg::Tensor x = b.input("x", esg::f32, {symbolic ? b.symbol("batch") : 2, 3});
  const esg::Tensor w = b.constant({1, 0, 0, 1, 1, -1}, {3, 2});
  const esg::Tensor bias = b.constant({0.5f, -10.0f}, {2});
  return b.build({esg::relu(esg::matmul(x, w) + bias)});
}

inline std::vector<float> run_mlp(const esg::Model& m, std::vector<float> x, int64_t batch) {
  return m.run({esg::HostTensor::from(esg::f32, x, {batch, 3})})[0].values<float>();
}

// sin(scale * (i + 1)) for i < n: values that are not round.
inline std::vector<float> seq(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(scale * static_cast<float>(i + 1));
  return v;
}

}  // namespace api_test
