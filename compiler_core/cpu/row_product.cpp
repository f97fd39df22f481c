#include "cpu/row_product.hpp"

#include <algorithm>

#include "ir/error.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace esg::cpu::row_product {

#if defined(__x86_64__)

bool available() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

namespace {

constexpr int kRows = 4;  // rows of w read side by side: four streams the prefetcher follows

__attribute__((target("avx2,fma"))) float horizontal_sum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

// K x N: y accumulates kRows rows of w at a time, each row read from its start to the share's
// last column; y (one share's columns) stays in L1 between the steps.
__attribute__((target("avx2,fma"))) void plain(const float* x, int64_t k, const float* w, int64_t ldw, int64_t n, float* y) {
  std::fill(y, y + n, 0.0f);
  const int64_t vector_end = n - n % 8;
  int64_t kk = 0;
  for (; kk + kRows <= k; kk += kRows) {
    const float* r = w + kk * ldw;
    const __m256 x0 = _mm256_broadcast_ss(x + kk), x1 = _mm256_broadcast_ss(x + kk + 1), x2 = _mm256_broadcast_ss(x + kk + 2),
                 x3 = _mm256_broadcast_ss(x + kk + 3);
    for (int64_t j = 0; j < vector_end; j += 8) {
      __m256 acc = _mm256_loadu_ps(y + j);
      acc = _mm256_fmadd_ps(x0, _mm256_loadu_ps(r + j), acc);
      acc = _mm256_fmadd_ps(x1, _mm256_loadu_ps(r + ldw + j), acc);
      acc = _mm256_fmadd_ps(x2, _mm256_loadu_ps(r + 2 * ldw + j), acc);
      acc = _mm256_fmadd_ps(x3, _mm256_loadu_ps(r + 3 * ldw + j), acc);
      _mm256_storeu_ps(y + j, acc);
    }
    for (int64_t j = vector_end; j < n; ++j) y[j] += x[kk] * r[j] + x[kk + 1] * r[ldw + j] + x[kk + 2] * r[2 * ldw + j] + x[kk + 3] * r[3 * ldw + j];
  }
  for (; kk < k; ++kk)
    for (int64_t j = 0; j < n; ++j) y[j] += x[kk] * w[kk * ldw + j];
}

// N x K: kRows of y at a time, each the dot product of x with one row of w, read whole.
__attribute__((target("avx2,fma"))) void transposed(const float* x, int64_t k, const float* w, int64_t ldw, int64_t n, float* y) {
  const int64_t vector_end = k - k % 8;
  int64_t j = 0;
  for (; j + kRows <= n; j += kRows) {
    const float* r = w + j * ldw;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    for (int64_t kk = 0; kk < vector_end; kk += 8) {
      const __m256 v = _mm256_loadu_ps(x + kk);
      s0 = _mm256_fmadd_ps(v, _mm256_loadu_ps(r + kk), s0);
      s1 = _mm256_fmadd_ps(v, _mm256_loadu_ps(r + ldw + kk), s1);
      s2 = _mm256_fmadd_ps(v, _mm256_loadu_ps(r + 2 * ldw + kk), s2);
      s3 = _mm256_fmadd_ps(v, _mm256_loadu_ps(r + 3 * ldw + kk), s3);
    }
    float sums[kRows] = {horizontal_sum(s0), horizontal_sum(s1), horizontal_sum(s2), horizontal_sum(s3)};
    for (int64_t kk = vector_end; kk < k; ++kk)
      for (int q = 0; q < kRows; ++q) sums[q] += x[kk] * r[q * ldw + kk];
    std::copy(sums, sums + kRows, y + j);
  }
  for (; j < n; ++j) {
    const float* r = w + j * ldw;
    __m256 s = _mm256_setzero_ps();
    for (int64_t kk = 0; kk < vector_end; kk += 8) s = _mm256_fmadd_ps(_mm256_loadu_ps(x + kk), _mm256_loadu_ps(r + kk), s);
    float sum = horizontal_sum(s);
    for (int64_t kk = vector_end; kk < k; ++kk) sum += x[kk] * r[kk];
    y[j] = sum;
  }
}

}  // namespace

void multiply(const float* x, int64_t k, const float* w, int64_t ldw, bool transposed_w, int64_t n, float* y) {
  (transposed_w ? transposed : plain)(x, k, w, ldw, n, y);
}

#else

bool available() { return false; }

void multiply(const float*, int64_t, const float*, int64_t, bool, int64_t, float*) {
  throw ir::Error(ir::ErrorCode::Internal, "cpu: the one-row product runs on x86-64 only");
}

#endif

}  // namespace esg::cpu::row_product
