#include "cpu/integer_gemm.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "ir/error.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace esg::cpu::integer_gemm {
namespace {

// K in blocks of kDepth (a panel's block, 12 KiB, stays in L1 while the rows' blocks pass it),
// rows in blocks of kRows (their widened block, 64 KiB, stays in L2 while the panels pass).
// Chosen on a Zen 3 among 128, 256 and 512 deep: 128 x 768 x 3072 on two threads ran at
// 92-135 G multiply-adds a second with 256, 59-98 with 512 or 128.
constexpr int64_t kDepth = 256;
constexpr int64_t kRows = 128;
constexpr int kBlockRows = 4;  // the micro-kernel's rows

int64_t panels(int64_t n) { return (n + kColumns - 1) / kColumns; }
int64_t pairs(int64_t k) { return (k + 1) / 2; }

// Element (row, column) of an operand less its zero point.
int32_t shifted(const Operand& x, int64_t row, int64_t column) {
  const uint8_t byte = x.data[row * x.stride + column];
  const int32_t value = x.is_signed ? static_cast<int8_t>(byte) : byte;
  return value - x.zero_points[x.per_row ? row : x.per_column ? column : 0];
}

}  // namespace

size_t packed_bytes(int64_t k, int64_t n) { return static_cast<size_t>(panels(n) * pairs(k) * kColumns * 2) * sizeof(int16_t); }

// Panel p holds, for each pair of rows (2q, 2q + 1) of b, each of its kColumns columns as two
// adjacent int16 (b[2q][j], b[2q + 1][j]): vpmaddwd's operand for 8 columns, three a pair.
// Columns past N and the row past an odd K are 0.
void pack(const Operand& b, int64_t k, int64_t n, uint8_t* into) {
  int16_t* out = reinterpret_cast<int16_t*>(into);
  for (int64_t p = 0; p < panels(n); ++p)
    for (int64_t q = 0; q < pairs(k); ++q)
      for (int64_t j = 0; j < kColumns; ++j)
        for (int64_t half = 0; half < 2; ++half, ++out) {
          const int64_t row = 2 * q + half, column = p * kColumns + j;
          *out = static_cast<int16_t>(row < k && column < n ? shifted(b, row, column) : 0);
        }
}

#if defined(__x86_64__)

bool available() { return __builtin_cpu_supports("avx2"); }

namespace {

// C[R x cols] (=, or += when `accumulate`) the product of R widened rows of A (`lda` int16
// apart, `count` pairs each) and a panel's `count` pairs. The unroll pragmas keep the sums in
// registers (packed_gemm.cpp's reason).
template <int R>
__attribute__((target("avx2"))) void block(const int16_t* a, int64_t lda, const int16_t* panel, int64_t count, int32_t* c,
                                           int64_t ldc, int64_t cols, bool accumulate) {
  __m256i sum[R][3];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 3
    for (int j = 0; j < 3; ++j) sum[r][j] = _mm256_setzero_si256();
  for (int64_t q = 0; q < count; ++q, panel += 2 * kColumns) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + 16));
    const __m256i b2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + 32));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      int32_t pair;
      std::memcpy(&pair, a + r * lda + 2 * q, sizeof pair);
      const __m256i x = _mm256_set1_epi32(pair);
      sum[r][0] = _mm256_add_epi32(sum[r][0], _mm256_madd_epi16(x, b0));
      sum[r][1] = _mm256_add_epi32(sum[r][1], _mm256_madd_epi16(x, b1));
      sum[r][2] = _mm256_add_epi32(sum[r][2], _mm256_madd_epi16(x, b2));
    }
  }
  if (cols == kColumns) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 3
      for (int j = 0; j < 3; ++j) {
        __m256i* to = reinterpret_cast<__m256i*>(c + r * ldc + 8 * j);
        _mm256_storeu_si256(to, accumulate ? _mm256_add_epi32(_mm256_loadu_si256(to), sum[r][j]) : sum[r][j]);
      }
    return;
  }
  alignas(32) int32_t row[kColumns];  // the last panel's columns past N are padding
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 3
    for (int j = 0; j < 3; ++j) _mm256_store_si256(reinterpret_cast<__m256i*>(row + 8 * j), sum[r][j]);
    int32_t* to = c + r * ldc;
    // Modulo 2^32, as the vector adds: int32's wrap-around without signed overflow.
    for (int64_t j = 0; j < cols; ++j)
      to[j] = accumulate ? static_cast<int32_t>(static_cast<uint32_t>(to[j]) + static_cast<uint32_t>(row[j])) : row[j];
  }
}

using Block = void (*)(const int16_t*, int64_t, const int16_t*, int64_t, int32_t*, int64_t, int64_t, bool);
constexpr Block kBlocks[kBlockRows + 1] = {nullptr, block<1>, block<2>, block<3>, block<4>};

}  // namespace

void multiply(const Operand& a, int64_t m, const uint8_t* packed, int64_t k, int64_t n, int64_t first, int64_t last, int32_t* c,
              int64_t ldc) {
  // A block of rows widened, kDepth deep (even, a pair's odd half 0), kept between calls.
  thread_local std::vector<int16_t> widened;
  widened.resize(static_cast<size_t>(kRows * kDepth));
  const int16_t* weights = reinterpret_cast<const int16_t*>(packed);
  for (int64_t r0 = 0; r0 < m; r0 += kRows) {
    const int64_t r1 = std::min(m, r0 + kRows);
    for (int64_t k0 = 0; k0 < k; k0 += kDepth) {
      const int64_t depth = std::min(kDepth, k - k0), width = 2 * pairs(depth);
      for (int64_t r = r0; r < r1; ++r) {
        int16_t* to = widened.data() + (r - r0) * width;
        const uint8_t* from = a.data + r * a.stride + k0;
        const int32_t zero = a.zero_points[a.per_row ? r : 0];
        if (a.is_signed)
          for (int64_t p = 0; p < depth; ++p) to[p] = static_cast<int16_t>(static_cast<int8_t>(from[p]) - zero);
        else
          for (int64_t p = 0; p < depth; ++p) to[p] = static_cast<int16_t>(from[p] - zero);
        if (depth < width) to[depth] = 0;
      }
      for (int64_t p = first / kColumns; p < panels(n) && p * kColumns < last; ++p) {
        const int16_t* panel = weights + (p * pairs(k) + k0 / 2) * 2 * kColumns;
        const int64_t cols = std::min(kColumns, n - p * kColumns);
        for (int64_t r = r0; r < r1; r += kBlockRows) {
          const int64_t rows = std::min<int64_t>(kBlockRows, r1 - r);
          kBlocks[rows](widened.data() + (r - r0) * width, width, panel, width / 2, c + r * ldc + p * kColumns, ldc, cols, k0 > 0);
        }
      }
    }
  }
}

#else

bool available() { return false; }

void multiply(const Operand&, int64_t, const uint8_t*, int64_t, int64_t, int64_t, int64_t, int32_t*, int64_t) {
  throw ir::Error(ir::ErrorCode::Internal, "cpu: the integer GEMM runs on x86-64 only");
}

#endif

}  // namespace esg::cpu::integer_gemm
