// Models run from several threads at once, kernels split over threads, streams on threads of their
// own: the bytes of one thread, and models that stay usable after a failure. (The tsan preset runs
// these under ThreadSanitizer.)
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include <esgraph/esgraph.hpp>

#include "api_graphs.hpp"

using api_test::seq;
using esg::HostTensor;
using esg::Tensor;

TEST_CASE("one model runs from several threads at once") {
  esg::GraphBuilder b("wide");
  const Tensor x = b.input("x", esg::f32, {64, 64});
  Tensor y = x;
  for (int i = 0; i < 8; ++i) y = esg::tanh(esg::matmul(y, x) * 0.01f);
  const esg::Model m = esg::compile(b.build({y}));
  std::vector<float> xs(64 * 64);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(static_cast<float>(i));
  const std::vector<float> want = m.run({HostTensor::from(esg::f32, xs, {64, 64})})[0].values<float>();
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 5; ++r) ok[static_cast<size_t>(t)] += m.run({HostTensor::from(esg::f32, xs, {64, 64})})[0].values<float>() == want;
    });
  for (auto& t : threads) t.join();
  CHECK(ok == std::vector<int>{5, 5, 5, 5});
}

TEST_CASE("runs of many sizes from several threads bind and drop plans and stay right") {
  // Bindings are made outside the model's lock, sharing the kernels of a donor another thread
  // may drop meanwhile (2 kept).
  esg::GraphBuilder b("sizes");
  const Tensor x = b.input("x", esg::f32, {b.symbol("n"), 8});
  const Tensor w = b.constant(seq(8 * 8, 0.3f), {8, 8});
  const esg::Model m = esg::compile(b.build({esg::relu(esg::matmul(x, w) + 0.5f)}), esg::CompileOptions().max_plans(2));
  auto want = [](const std::vector<float>& xs, int64_t n) {
    const std::vector<float> ws = seq(8 * 8, 0.3f);
    std::vector<float> y(static_cast<size_t>(n * 8));
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < 8; ++c) {
        float sum = 0.5f;
        for (int64_t k = 0; k < 8; ++k) sum += xs[static_cast<size_t>(r * 8 + k)] * ws[static_cast<size_t>(k * 8 + c)];
        y[static_cast<size_t>(r * 8 + c)] = std::max(0.0f, sum);
      }
    return y;
  };
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 24; ++i) {
        const int64_t n = 1 + (t * 5 + i * 7) % 11;
        const std::vector<float> xs = seq(8 * n, 0.1f * static_cast<float>(n));
        const std::vector<float> got = m.run({HostTensor::from(esg::f32, xs, {n, 8})})[0].values<float>();
        const std::vector<float> expected = want(xs, n);
        for (size_t k = 0; k < got.size(); ++k) wrong[static_cast<size_t>(t)] += std::abs(got[k] - expected[k]) > 1e-4f;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(wrong == std::vector<int>{0, 0, 0, 0});
  CHECK(m.stats().bindings >= 11);
}

TEST_CASE("runs of many sizes from several threads on the simulated Ascend share the class's device") {
  // One size class (a range): its bindings share one device and, with only generated kernels,
  // one captured model, each writing its tilings before it runs; 2 kept, so bindings and the
  // device (with its last binding) go and come while other threads run. n = 1 lowers otherwise
  // (a device of its own).
  esg::GraphBuilder b("sizes");
  const Tensor x = b.input("x", esg::f32, {b.symbol("n"), 8});
  const esg::Graph g = b.build({esg::softmax(esg::exp(x) * 0.5f + esg::tanh(x))});
  const esg::Model sim = esg::compile(g, esg::CompileOptions().backend("ascend-sim").symbol_range("n", 1, 16).max_plans(2));
  const esg::Model cpu = esg::compile(g);
  std::vector<std::thread> threads;
  std::vector<int> wrong(3, 0);
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 16; ++i) {
        const int64_t n = 1 + (t * 5 + i * 7) % 16;
        const std::vector<HostTensor> in = {HostTensor::from(esg::f32, seq(8 * n, 0.05f * static_cast<float>(n)), {n, 8})};
        const std::vector<float> got = sim.run(in)[0].values<float>(), expected = cpu.run(in)[0].values<float>();
        for (size_t k = 0; k < got.size(); ++k) wrong[static_cast<size_t>(t)] += std::abs(got[k] - expected[k]) > 1e-5f;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(wrong == std::vector<int>{0, 0, 0});
  CHECK(sim.stats().captured == 1);
}

TEST_CASE("kernels split over threads give the bytes of one thread, also from concurrent runs") {
  // 300 x 700 elements: the fused and the unfused elementwise kernels split their work; the
  // column operand [300, 1] and the row operand [700] are read through their broadcast layouts.
  esg::GraphBuilder b("split");
  const Tensor x = b.input("x", esg::f32, {300, 700}), col = b.input("col", esg::f32, {300, 1}), row = b.input("row", esg::f32, {700});
  const Tensor y = esg::sigmoid(x * row - col) + esg::tanh(x) * 0.5f;
  const esg::Graph g = b.build({y, esg::greater(x, col)});
  std::vector<float> xs(300 * 700), cs(300), rs(700);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(static_cast<float>(i) * 0.01f) * 3;
  for (size_t i = 0; i < cs.size(); ++i) cs[i] = std::cos(static_cast<float>(i));
  for (size_t i = 0; i < rs.size(); ++i) rs[i] = std::sin(static_cast<float>(i) * 0.3f);
  const std::vector<HostTensor> in{HostTensor::from(esg::f32, xs, {300, 700}), HostTensor::from(esg::f32, cs, {300, 1}),
                                   HostTensor::from(esg::f32, rs, {700})};
  for (bool fusion : {true, false}) {
    CAPTURE(fusion);
    const auto want = esg::compile(g, esg::CompileOptions().fusion(fusion).threads(1)).run(in);
    const esg::Model m = esg::compile(g, esg::CompileOptions().fusion(fusion).threads(2));
    std::vector<std::thread> threads;
    std::vector<int> ok(3, 0);
    for (int t = 0; t < 3; ++t)
      threads.emplace_back([&, t] {
        for (int r = 0; r < 4; ++r) {
          const auto got = m.run(in);
          ok[static_cast<size_t>(t)] += got[0].values<float>() == want[0].values<float>() && got[1].values<uint8_t>() == want[1].values<uint8_t>();
        }
      });
    for (auto& t : threads) t.join();
    CHECK(ok == std::vector<int>{4, 4, 4});
  }
}

TEST_CASE("streams run on their own threads and give the bytes of one stream, also from concurrent runs") {
  // Four independent branches (matmuls and elementwise ops), joined at the end.
  esg::GraphBuilder b("branches");
  const Tensor x = b.input("x", esg::f32, {64, 64});
  Tensor sum;
  for (int branch = 0; branch < 4; ++branch) {
    Tensor y = x * static_cast<float>(branch + 1);
    for (int i = 0; i < 4; ++i) y = esg::tanh(esg::matmul(y, x) * 0.01f) + x;
    sum = branch == 0 ? y : sum + y;
  }
  const esg::Graph g = b.build({sum});
  std::vector<float> xs(64 * 64);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(static_cast<float>(i) * 0.1f);
  const std::vector<HostTensor> in{HostTensor::from(esg::f32, xs, {64, 64})};
  const std::vector<float> want = esg::compile(g).run(in)[0].values<float>();
  for (int streams : {2, 4}) {
    CAPTURE(streams);
    const esg::Model m = esg::compile(g, esg::CompileOptions().streams(streams).threads(streams));
    CHECK(m.stats().streams == streams);
    std::vector<std::thread> callers;
    std::vector<int> ok(2, 0);
    for (int t = 0; t < 2; ++t)  // one run takes the pool; a concurrent one runs in order
      callers.emplace_back([&, t] {
        for (int r = 0; r < 10; ++r) ok[static_cast<size_t>(t)] += m.run(in)[0].values<float>() == want;
      });
    for (auto& c : callers) c.join();
    CHECK(ok == std::vector<int>{10, 10});
  }
}

TEST_CASE("a kernel failing inside a stream stops the run with its error; the model stays usable") {
  // Two branches on two streams; one gathers with an index from the caller.
  esg::GraphBuilder b("failing");
  const Tensor x = b.input("x", esg::f32, {64, 64}), i = b.input("i", esg::i64, {4});
  const Tensor left = esg::tanh(esg::matmul(x, x)) * 2.0f;
  const Tensor right = esg::gather(esg::relu(x) + 1.0f, i);
  const esg::Model m = esg::compile(b.build({left, right}), esg::CompileOptions().streams(2).threads(2));
  const HostTensor xs = HostTensor::from(esg::f32, std::vector<float>(64 * 64, 0.5f), {64, 64});
  for (int r = 0; r < 3; ++r) {
    CHECK_THROWS_WITH_AS(m.run({xs, HostTensor::from(esg::i64, std::vector<int64_t>{0, 1, 99, 2}, {4})}),
                         doctest::Contains("out of range"), esg::Error);
    const auto ok = m.run({xs, HostTensor::from(esg::i64, std::vector<int64_t>{0, 1, 63, 2}, {4})});
    CHECK(ok[1].values<float>()[0] == 1.5f);
  }
}
