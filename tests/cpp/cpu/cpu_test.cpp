// The CPU backend's pieces against independent references: the vectorizable exp, sigmoid and
// tanh against the C library in double precision over their whole range and at the special
// values; the operand layouts of broadcasting against a plain index computation; the thread pool
// under racing callers.
#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <cmath>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "cpu/elementwise_f32.hpp"
#include "cpu/vector_math.hpp"
#include "runtime/thread_pool.hpp"

namespace {

// Distance in units in the last place of `want` (rounded to f32), for finite results.
double ulps(float got, double want) {
  const float w = static_cast<float>(want);
  if (got == w) return 0;
  if (!std::isfinite(got)) return std::numeric_limits<double>::infinity();  // NaN must not compare away
  const float spacing = std::nextafter(std::fabs(w), std::numeric_limits<float>::infinity()) - std::fabs(w);
  return std::fabs(static_cast<double>(got) - want) / spacing;
}

template <class Got, class Want>
double max_ulps(Got got, Want want, float lo, float hi) {
  double worst = 0;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int i = 0; i < 200000; ++i) {
    const float x = i < 1000 ? lo + (hi - lo) * static_cast<float>(i) / 1000 : dist(rng);
    const double w = want(static_cast<double>(x));
    if (std::isfinite(w) && std::fabs(w) > 1.2e-38) worst = std::max(worst, ulps(got(x), w));
  }
  return worst;
}

}  // namespace

// Ulps from the exact value (so a correctly rounded result may be 0.5 off): exp within 2,
// sigmoid (exp, a sum and a quotient) within 3, tanh (a quotient of two rounded polynomials)
// within 6.
TEST_CASE("f32 exp, sigmoid and tanh are within 2-6 ulps of the C library in double") {
  using namespace esg::cpu;
  CHECK(max_ulps(vm::exp, [](double x) { return std::exp(x); }, -87.0f, 88.72f) <= 2);
  CHECK(max_ulps(vm::exp, [](double x) { return std::exp(x); }, 88.0f, 88.72f) <= 2);  // n = 128: 2^n alone overflows
  CHECK(max_ulps(vm::exp, [](double x) { return std::exp(x); }, -1.0f, 1.0f) <= 2);
  const auto sigmoid = [](double x) { return 1 / (1 + std::exp(-x)); };
  CHECK(max_ulps(vm::sigmoid, sigmoid, -87.0f, 30.0f) <= 3);
  CHECK(max_ulps(vm::sigmoid, sigmoid, -1.0f, 1.0f) <= 3);
  CHECK(max_ulps(vm::tanh, [](double x) { return std::tanh(x); }, -10.0f, 10.0f) <= 6);
  CHECK(max_ulps(vm::tanh, [](double x) { return std::tanh(x); }, 3.0f, 9.1f) <= 6);
  CHECK(max_ulps(vm::tanh, [](double x) { return std::tanh(x); }, -0.01f, 0.01f) <= 6);
}

TEST_CASE("f32 erf is within 1.5e-7 of the C library's in double, and odd, and passes NaN") {
  using namespace esg::cpu;
  double worst = 0;
  for (int i = -600000; i <= 600000; ++i) {
    const float x = static_cast<float>(i) * 1e-5f;
    worst = std::max(worst, std::fabs(static_cast<double>(vm::erf(x)) - std::erf(static_cast<double>(x))));
    if (vm::erf(-x) != -vm::erf(x)) FAIL("erf(-x) != -erf(x) at x = " << x);
  }
  CHECK(worst <= 1.5e-7);
  CHECK(vm::erf(0.0f) == 0.0f);
  CHECK(std::fabs(vm::erf(1e-30f) / 1e-30f - 1.1283792f) < 1e-6f);  // erf(x) = 2x/sqrt(pi) near 0
  CHECK(vm::erf(std::numeric_limits<float>::infinity()) == 1.0f);
  CHECK(vm::erf(-std::numeric_limits<float>::infinity()) == -1.0f);
  CHECK(std::isnan(vm::erf(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("f32 exp, sigmoid and tanh at their special values") {
  using namespace esg::cpu;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(vm::exp(0.0f) == 1.0f);
  CHECK(vm::exp(89.0f) == inf);
  CHECK(vm::exp(inf) == inf);
  CHECK(vm::exp(-inf) == 0.0f);
  CHECK(vm::exp(-110.0f) == 0.0f);
  CHECK(std::isnan(vm::exp(nan)));
  // Denormal results: e^-100 = 3.72e-44 is 26.6 times the smallest denormal; e^-103.9 rounds to
  // the smallest one (n = -150 there); e^-104.5 rounds to 0.
  CHECK(std::fabs(vm::exp(-100.0f) - static_cast<float>(std::exp(-100.0))) <= std::numeric_limits<float>::denorm_min());
  CHECK(vm::exp(-103.9f) == std::numeric_limits<float>::denorm_min());
  CHECK(vm::exp(-104.5f) == 0.0f);
  // Just below overflow (n = 128): finite, as is the sigmoid built on it.
  CHECK(vm::exp(88.7f) == doctest::Approx(static_cast<float>(std::exp(static_cast<double>(88.7f)))).epsilon(1e-6));
  CHECK(vm::sigmoid(0.0f) == 0.5f);
  CHECK(vm::sigmoid(inf) == 1.0f);
  CHECK(vm::sigmoid(-inf) == 0.0f);
  CHECK(vm::sigmoid(20.0f) == static_cast<float>(1 / (1 + std::exp(-20.0))));
  // e^-x scaled by 2^(n-1)·2 where n reaches 127 and 128 (-x from 88.03 on): results below
  // FLT_MIN, within 3 ulps of f32 precision or one denormal step.
  for (const float x : {-86.0f, -87.5f, -88.0f, -88.4f, -88.5f, -88.7f}) {
    const double want = 1 / (1 + std::exp(-static_cast<double>(x)));
    CHECK(std::fabs(vm::sigmoid(x) - want) <= 3 * 6e-8 * want + std::numeric_limits<float>::denorm_min());
  }
  CHECK(vm::sigmoid(-90.0f) == 0.0f);  // a denormal under 1e-39, flushed
  CHECK(std::isnan(vm::sigmoid(nan)));
  CHECK(vm::tanh(0.0f) == 0.0f);
  CHECK(std::signbit(vm::tanh(-0.0f)));
  CHECK(vm::tanh(1e-30f) == 1e-30f);
  CHECK(vm::tanh(inf) == 1.0f);
  CHECK(vm::tanh(-inf) == -1.0f);
  CHECK(vm::tanh(30.0f) == 1.0f);
  CHECK(vm::tanh(9.02f) == 1.0f);  // the first float whose tanh rounds to 1 is near 9.0109
  CHECK(vm::tanh(-9.5f) == -1.0f);
  CHECK(vm::tanh(8.9f) < 1.0f);
  CHECK(std::isnan(vm::tanh(nan)));
}

TEST_CASE("operand layouts read what numpy broadcasting reads, chunk by chunk") {
  using esg::ir::Shape;
  using namespace esg::cpu;
  // An operand of shape `in` against an output of shape `out`: each element the chunks read is
  // compared with the element a plain right-aligned broadcast index gives.
  auto check_reads = [](const Shape& out, const Shape& in) {
    CAPTURE(out.rank());
    CAPTURE(in.rank());
    OperandLayout layout;
    const Shape* operand = &in;
    const int64_t run = plan_operands(out, &operand, 1, &layout);
    REQUIRE(run >= 1);
    std::vector<float> data(static_cast<size_t>(in.num_elements()));
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
    const esg::eval::TensorRef t{esg::ir::DType::F32, in, reinterpret_cast<uint8_t*>(data.data())};
    float own[kChunk];
    prepare_row(t, layout, own);
    int64_t mismatches = 0;
    for_each_chunk(0, out.num_elements(), run, [&](int64_t base, int64_t n) {
      const float* row = chunk_row(t, layout, out, base, n, own);
      for (int64_t e = 0; e < n; ++e) {
        int64_t rest = base + e, at = 0, stride = 1;
        for (size_t d = out.rank(); d-- > 0;) {
          const int64_t coord = rest % out[d];
          rest /= out[d];
          const size_t lead = out.rank() - in.rank();
          if (d >= lead && in[d - lead] != 1) at += coord * stride;
          if (d >= lead) stride *= in[d - lead];
        }
        mismatches += row[e] != data[static_cast<size_t>(at)];
      }
    });
    CHECK(mismatches == 0);
    return layout.access;
  };
  // Rows longer than a quarter chunk (kChunk / 4 = 512 floats) are read in place.
  CHECK(check_reads({4, 600}, {4, 600}) == Access::Direct);
  CHECK(check_reads({4, 600}, {1}) == Access::Scalar);
  CHECK(check_reads({4, 600}, {600}) == Access::Contiguous);
  CHECK(check_reads({4, 600}, {1, 600}) == Access::Contiguous);
  CHECK(check_reads({4, 600}, {4, 1}) == Access::Repeated);
  CHECK(check_reads({4, 300}, {300}) == Access::Periodic);  // a short row: copied over each chunk
  CHECK(check_reads({3, 5, 700}, {3, 1, 700}) == Access::Contiguous);
  CHECK(check_reads({3, 5, 7}, {5, 1}) == Access::Repeated);
  CHECK(check_reads({2, 1, 3, 1, 5}, {3, 1, 5}) == Access::Periodic);  // 15 contiguous, twice
  CHECK(check_reads({6, 1025}, {6, 1}) == Access::Repeated);
  CHECK(check_reads({0, 5}, {5}) == Access::Periodic);
  // A per-channel value beside blocked channels: 16 lanes repeated over each plane.
  CHECK(check_reads({2, 5, 30, 16}, {2, 5, 1, 16}) == Access::Periodic);
  CHECK(check_reads({7, 100, 12}, {7, 1, 12}) == Access::Periodic);  // 12 does not divide a chunk: every phase
  CHECK(check_reads({3, 700}, {700}) == Access::Contiguous);         // long stretches are read in place
}

TEST_CASE("the thread pool runs every piece once, job after job, with callers racing for it") {
  esg::runtime::ThreadPool pool(3);
  CHECK(pool.threads() == 3);
  std::vector<std::thread> callers;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&, t] {
      for (int job = 0; job < 300; ++job) {
        const int64_t pieces = 1 + (job * 7 + t) % 9;
        std::vector<std::atomic<int>> hits(static_cast<size_t>(pieces));
        pool.run(pieces, [&](int64_t i) { hits[static_cast<size_t>(i)].fetch_add(1); });
        for (const auto& h : hits) bad[static_cast<size_t>(t)] += h.load() != 1;
      }
    });
  for (std::thread& c : callers) c.join();
  CHECK(bad == std::vector<int>{0, 0, 0, 0});
}

TEST_CASE("the thread pool rethrows a failed piece's error to its caller once all pieces are done") {
  esg::runtime::ThreadPool pool(2);
  std::atomic<int> ran{0};
  CHECK_THROWS_WITH(pool.run(8, [&](int64_t i) {
    ran.fetch_add(1);
    if (i == 3) throw std::runtime_error("piece 3");
  }), "piece 3");
  CHECK(ran.load() == 8);
  CHECK_THROWS_WITH(pool.run_together(2, [&](int64_t i) {
    if (i == 1) throw std::runtime_error("piece 1");
  }), "piece 1");
  int64_t sum = 0;
  std::mutex mu;
  pool.run(4, [&](int64_t i) { std::lock_guard<std::mutex> lock(mu); sum += i; });  // still usable
  CHECK(sum == 6);
}
