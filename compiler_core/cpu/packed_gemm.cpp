#include "cpu/packed_gemm.hpp"

#include <algorithm>

#include "ir/error.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace esg::cpu::packed_gemm {
namespace {

// K in blocks of kDepth, so that a panel's block (24 KiB) stays in L1 while the rows' blocks
// pass it; rows in blocks of kRows, so that those (128 KiB) stay in L2 while the panels pass.
// Chosen on a Zen 3 (32 KiB L1, 512 KiB L2) among 128-384 deep and 64-256 rows.
constexpr int64_t kDepth = 256;
constexpr int64_t kRows = 128;
constexpr int kBlockRows = 4;  // the micro-kernel's rows

int64_t panels(int64_t n) { return (n + kColumns - 1) / kColumns; }

}  // namespace

size_t packed_bytes(int64_t k, int64_t n) { return static_cast<size_t>(panels(n) * k * kColumns) * sizeof(float); }

void pack(const float* b, int64_t ldb, bool transposed, int64_t k, int64_t n, float* into) {
  for (int64_t p = 0; p < panels(n); ++p)
    for (int64_t kk = 0; kk < k; ++kk, into += kColumns)
      for (int64_t j = 0; j < kColumns; ++j) {
        const int64_t column = p * kColumns + j;
        into[j] = column >= n ? 0.0f : transposed ? b[column * ldb + kk] : b[kk * ldb + column];
      }
}

#if defined(__x86_64__)

bool available() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

namespace {

// C[R x cols] (=, or += when `accumulate`) the product of R rows of A (`depth` floats each,
// `lda` apart) and a panel's `depth` rows. The unroll pragmas keep the accumulators in
// registers: without them GCC keeps the array in memory and stores it at every step (half
// the speed).
template <int R>
__attribute__((target("avx2,fma"))) void block(const float* a, int64_t lda, const float* panel, int64_t depth, float* c,
                                               int64_t ldc, int64_t cols, bool accumulate) {
  __m256 sum[R][3];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 3
    for (int j = 0; j < 3; ++j) sum[r][j] = _mm256_setzero_ps();
  for (int64_t kk = 0; kk < depth; ++kk, panel += kColumns) {
    const __m256 b0 = _mm256_loadu_ps(panel), b1 = _mm256_loadu_ps(panel + 8), b2 = _mm256_loadu_ps(panel + 16);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * lda + kk);
      sum[r][0] = _mm256_fmadd_ps(x, b0, sum[r][0]);
      sum[r][1] = _mm256_fmadd_ps(x, b1, sum[r][1]);
      sum[r][2] = _mm256_fmadd_ps(x, b2, sum[r][2]);
    }
  }
  if (cols == kColumns) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 3
      for (int j = 0; j < 3; ++j) {
        float* to = c + r * ldc + 8 * j;
        _mm256_storeu_ps(to, accumulate ? _mm256_add_ps(_mm256_loadu_ps(to), sum[r][j]) : sum[r][j]);
      }
    return;
  }
  alignas(32) float row[kColumns];  // the last panel's columns past N are padding
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 3
    for (int j = 0; j < 3; ++j) _mm256_store_ps(row + 8 * j, sum[r][j]);
    float* to = c + r * ldc;
    for (int64_t j = 0; j < cols; ++j) to[j] = accumulate ? to[j] + row[j] : row[j];
  }
}

using Block = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t, bool);
constexpr Block kBlocks[kBlockRows + 1] = {nullptr, block<1>, block<2>, block<3>, block<4>};

}  // namespace

void multiply(const float* a, int64_t lda, int64_t m, const float* packed, int64_t k, int64_t n, float* c, int64_t ldc) {
  for (int64_t r0 = 0; r0 < m; r0 += kRows) {
    const int64_t r1 = std::min(m, r0 + kRows);
    for (int64_t k0 = 0; k0 < k; k0 += kDepth) {
      const int64_t depth = std::min(kDepth, k - k0);
      for (int64_t p = 0; p < panels(n); ++p) {
        const float* panel = packed + (p * k + k0) * kColumns;
        const int64_t cols = std::min(kColumns, n - p * kColumns);
        for (int64_t r = r0; r < r1; r += kBlockRows) {
          const int64_t rows = std::min<int64_t>(kBlockRows, r1 - r);
          kBlocks[rows](a + r * lda + k0, lda, panel, depth, c + r * ldc + p * kColumns, ldc, cols, k0 > 0);
        }
      }
    }
  }
}

#else

bool available() { return false; }

void multiply(const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t) {
  throw ir::Error(ir::ErrorCode::Internal, "cpu: the packed GEMM runs on x86-64 only");
}

#endif

}  // namespace esg::cpu::packed_gemm
