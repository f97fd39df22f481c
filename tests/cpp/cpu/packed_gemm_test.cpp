// The packed GEMM (cpu/packed_gemm.hpp) against a product summed in double: row counts around
// the micro-kernel's 4 and the row block's 128, depths around the K block's 256, widths around
// a panel's 24 (padding in the last one), B plain and transposed, C rows wider than N (nothing
// past N written) and a second call accumulating nothing from the first.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu/packed_gemm.hpp"

namespace pg = esg::cpu::packed_gemm;

namespace {

// The largest |got - want| over the scale of the sum of |a||b| (the bound of f32 rounding).
double worst_error(int64_t m, int64_t k, int64_t n, bool transposed) {
  std::mt19937 rng(static_cast<unsigned>(m * 131 + k * 7 + n + transposed));
  std::normal_distribution<float> normal;
  std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * (n + 3)));
  for (float& x : a) x = normal(rng);
  for (float& x : b) x = normal(rng);
  const int64_t ldb = transposed ? k : n + 3;  // B's rows longer than the columns taken
  auto b_at = [&](int64_t kk, int64_t j) { return transposed ? b[static_cast<size_t>(j * ldb + kk)] : b[static_cast<size_t>(kk * ldb + j)]; };
  std::vector<float> packed(pg::packed_bytes(k, n) / sizeof(float));
  pg::pack(b.data(), ldb, transposed, k, n, packed.data());
  const int64_t ldc = n + 5;
  constexpr float kUntouched = 1234.5f;
  std::vector<float> c(static_cast<size_t>(m * ldc), kUntouched);
  pg::multiply(a.data(), k, m, packed.data(), k, n, c.data(), ldc);
  pg::multiply(a.data(), k, m, packed.data(), k, n, c.data(), ldc);  // overwrites: the same result
  double worst = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0, scale = 1e-30;
      for (int64_t kk = 0; kk < k; ++kk) {
        want += static_cast<double>(a[static_cast<size_t>(i * k + kk)]) * b_at(kk, j);
        scale += std::fabs(static_cast<double>(a[static_cast<size_t>(i * k + kk)]) * b_at(kk, j));
      }
      worst = std::max(worst, std::fabs(c[static_cast<size_t>(i * ldc + j)] - want) / scale);
    }
    for (int64_t j = n; j < ldc; ++j) REQUIRE(c[static_cast<size_t>(i * ldc + j)] == kUntouched);
  }
  return worst;
}

}  // namespace

TEST_CASE("the packed GEMM's products are within f32 rounding of a sum in double, at every edge of its blocks") {
  if (!pg::available()) {
    MESSAGE("this CPU lacks AVX2 or FMA: the packed GEMM is not used here");
    return;
  }
  for (const bool transposed : {false, true})
    for (const int64_t m : {1, 3, 4, 5, 8, 9, 130})
      for (const int64_t k : {1, 7, 256, 300, 513})
        for (const int64_t n : {1, 8, 23, 24, 25, 50}) {
          CAPTURE(transposed);
          CAPTURE(m);
          CAPTURE(k);
          CAPTURE(n);
          CHECK(worst_error(m, k, n, transposed) < 1e-6);
        }
}

TEST_CASE("packed weights take whole zero-padded panels of 24 columns") {
  CHECK(pg::packed_bytes(5, 24) == 5 * 24 * sizeof(float));
  CHECK(pg::packed_bytes(5, 25) == 5 * 48 * sizeof(float));
  std::vector<float> b = {1, 2, 3, 4};  // 2 x 2
  std::vector<float> packed(pg::packed_bytes(2, 2) / sizeof(float), -1.0f);
  pg::pack(b.data(), 2, false, 2, 2, packed.data());
  CHECK(packed[0] == 1);
  CHECK(packed[1] == 2);
  CHECK(packed[2] == 0);  // padding
  CHECK(packed[24] == 3);
  CHECK(packed[25] == 4);
  CHECK(packed[47] == 0);
}
