// The one-row product (cpu/row_product.hpp) against a sum in double: depths around its 4 rows of
// K a step, widths around its 8 columns a register (plain) and 4 rows of N a step (transposed),
// dot products around 8, weights with rows longer than the part taken, nothing past N written.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu/row_product.hpp"

namespace rp = esg::cpu::row_product;

TEST_CASE("the one-row product is within f32 rounding of a sum in double, at every tail of its steps") {
  if (!rp::available()) {
    MESSAGE("this CPU lacks AVX2 or FMA: the one-row product is not used here");
    return;
  }
  for (const bool transposed : {false, true})
    for (const int64_t k : {1, 3, 4, 5, 8, 9, 17, 300})
      for (const int64_t n : {1, 4, 7, 8, 9, 31, 70}) {
        CAPTURE(transposed);
        CAPTURE(k);
        CAPTURE(n);
        std::mt19937 rng(static_cast<unsigned>(k * 131 + n * 7 + transposed));
        std::normal_distribution<float> normal;
        const int64_t ldw = (transposed ? k : n) + 3;
        std::vector<float> x(static_cast<size_t>(k)), w(static_cast<size_t>((transposed ? n : k) * ldw));
        for (float& v : x) v = normal(rng);
        for (float& v : w) v = normal(rng);
        constexpr float kUntouched = 1234.5f;
        std::vector<float> y(static_cast<size_t>(n + 2), kUntouched);
        rp::multiply(x.data(), k, w.data(), ldw, transposed, n, y.data());
        for (int64_t j = 0; j < n; ++j) {
          double want = 0, scale = 1e-30;
          for (int64_t kk = 0; kk < k; ++kk) {
            const double p = static_cast<double>(x[static_cast<size_t>(kk)]) * w[static_cast<size_t>(transposed ? j * ldw + kk : kk * ldw + j)];
            want += p, scale += std::fabs(p);
          }
          CHECK(std::fabs(y[static_cast<size_t>(j)] - want) / scale < 1e-6);
        }
        CHECK(y[static_cast<size_t>(n)] == kUntouched);
        CHECK(y[static_cast<size_t>(n + 1)] == kUntouched);
      }
}
