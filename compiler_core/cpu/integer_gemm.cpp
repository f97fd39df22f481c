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

// K in blocks (a panel's block, 12 or 24 KiB, stays in L1 while the rows' blocks pass it), rows
// in blocks of kRows (their block, 64 or 128 KiB, stays in L2 while the panels pass). Chosen on
// a Zen 3 among 128, 256 and 512 deep for pairs (128 x 768 x 3072 on two threads ran at 92-135 G
// multiply-adds a second with 256, 59-98 with 512 or 128), and on a Zen 4 among 256, 512 and
// 1024 for VNNI's bytes (a 12-layer dynamically quantized encoder's 36 products: 30.7, 29.1 and
// 27.7 ms).
int64_t depth(Kernel kernel) { return kernel == Kernel::Pairs ? 256 : 1024; }
constexpr int64_t kRows = 128;

// What a kernel takes K in: pairs of int16 (vpmaddwd), quads of bytes (vpdpbusd).
int64_t group(Kernel kernel) { return kernel == Kernel::Pairs ? 2 : 4; }
int64_t panels(int64_t n) { return (n + kColumns - 1) / kColumns; }
int64_t groups(Kernel kernel, int64_t k) { return (k + group(kernel) - 1) / group(kernel); }
// The bytes of one group of one column, packed.
int64_t group_bytes(Kernel kernel) { return kernel == Kernel::Pairs ? 2 * sizeof(int16_t) : 4; }

int32_t value(const Operand& x, int64_t row, int64_t column) {
  const uint8_t byte = x.data[row * x.stride + column];
  return x.is_signed ? static_cast<int8_t>(byte) : byte;
}
int32_t zero_point(const Operand& x, int64_t row, int64_t column) { return x.zero_points[x.per_row ? row : x.per_column ? column : 0]; }

// VNNI's packed weights end with two int32 a column (its sum of b's values as s8, less K times
// its zero point; and that zero point as s8), then a tag: 32 bytes that keep their size from
// ever equalling the pairs' (a multiple of 96 bytes), so that a compiled-model file's packed
// weights are never read by the other kernel.
constexpr char kVnniTag[32] = "esgraph integer_gemm vpdpbusd";
int64_t vnni_columns_at(int64_t k, int64_t n) { return panels(n) * groups(Kernel::Vnni, k) * kColumns * 4; }

// The int32 a + b wrapping around, as the vector adds do.
int32_t wrapped_add(int32_t a, int32_t b) { return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b)); }
int32_t wrapped_sub(int32_t a, int32_t b) { return static_cast<int32_t>(static_cast<uint32_t>(a) - static_cast<uint32_t>(b)); }
int32_t wrapped_mul(int32_t a, int32_t b) { return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b)); }

}  // namespace

size_t packed_bytes(Kernel kernel, int64_t k, int64_t n) {
  const size_t panels_bytes = static_cast<size_t>(panels(n) * groups(kernel, k) * kColumns * group_bytes(kernel));
  if (kernel == Kernel::Pairs) return panels_bytes;
  return panels_bytes + static_cast<size_t>(panels(n) * kColumns) * 2 * sizeof(int32_t) + sizeof kVnniTag;
}

// Panel p holds, for each group of rows of b (2 or 4 of them from group(kernel) · q), each of its
// kColumns columns as adjacent elements: vpmaddwd's operand (two int16 less the zero point) or
// vpdpbusd's (four s8, u8 values shifted by -128) for 8 columns, three a group. Columns past N
// and rows past K are 0.
void pack(Kernel kernel, const Operand& b, int64_t k, int64_t n, uint8_t* into) {
  const int64_t size = group(kernel);
  const int32_t shift = b.is_signed ? 0 : -128;
  int16_t* pairs = reinterpret_cast<int16_t*>(into);
  int8_t* quads = reinterpret_cast<int8_t*>(into);
  for (int64_t p = 0; p < panels(n); ++p)
    for (int64_t q = 0; q < groups(kernel, k); ++q)
      for (int64_t j = 0; j < kColumns; ++j)
        for (int64_t t = 0; t < size; ++t) {
          const int64_t row = size * q + t, column = p * kColumns + j;
          const bool inside = row < k && column < n;
          if (kernel == Kernel::Pairs)
            *pairs++ = static_cast<int16_t>(inside ? value(b, row, column) - zero_point(b, row, column) : 0);
          else
            *quads++ = static_cast<int8_t>(inside ? value(b, row, column) + shift : 0);
        }
  if (kernel == Kernel::Pairs) return;
  int32_t* columns = reinterpret_cast<int32_t*>(into + vnni_columns_at(k, n));
  for (int64_t j = 0; j < panels(n) * kColumns; ++j) {
    int32_t sum = 0, zero = 0;
    if (j < n) {
      for (int64_t row = 0; row < k; ++row) sum = wrapped_add(sum, value(b, row, j) + shift);
      zero = zero_point(b, 0, j) + shift;
    }
    columns[2 * j] = wrapped_sub(sum, wrapped_mul(static_cast<int32_t>(k), zero));
    columns[2 * j + 1] = zero;
  }
  std::memcpy(into + packed_bytes(kernel, k, n) - sizeof kVnniTag, kVnniTag, sizeof kVnniTag);
}

#if defined(__x86_64__)

bool available(Kernel kernel) {
  if (kernel == Kernel::Pairs) return __builtin_cpu_supports("avx2");
  return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
}

namespace {

// C[R x cols] (=, or += when `accumulate`) from the micro-kernel's sums.
template <int R>
__attribute__((target("avx2"))) inline void store(const __m256i (&sum)[R][3], int32_t* c, int64_t ldc, int64_t cols, bool accumulate) {
  if (cols == kColumns) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 3
      for (int j = 0; j < 3; ++j) {
        __m256i* to = reinterpret_cast<__m256i*>(c + r * ldc + 8 * j);
        _mm256_storeu_si256(to, accumulate ? _mm256_add_epi32(_mm256_loadu_si256(to), sum[r][j]) : sum[r][j]);
      }
    return;
  }
  alignas(32) int32_t row[kColumns];  // the last panel's columns past N are padding
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 3
    for (int j = 0; j < 3; ++j) _mm256_store_si256(reinterpret_cast<__m256i*>(row + 8 * j), sum[r][j]);
    int32_t* to = c + r * ldc;
    for (int64_t j = 0; j < cols; ++j) to[j] = accumulate ? wrapped_add(to[j], row[j]) : row[j];
  }
}

// C[R x cols] (=, or += when `accumulate`) the product of R rows of A as the kernel takes them
// (`lda` elements apart, `count` groups each) and a panel's `count` groups. The unroll pragmas
// keep the sums in registers (packed_gemm.cpp's reason).
template <int R>
__attribute__((target("avx2"))) void pairs_block(const void* rows, int64_t lda, const void* weights, int64_t count, int32_t* c,
                                                 int64_t ldc, int64_t cols, bool accumulate) {
  const int16_t* a = static_cast<const int16_t*>(rows);
  const int16_t* panel = static_cast<const int16_t*>(weights);
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
  store<R>(sum, c, ldc, cols, accumulate);
}

// VNNI's micro-kernel takes up to 8 rows: AVX-512's 32 vector registers hold its 24 sums. Each
// sum is accumulated by inline assembly: GCC 12 copies every register that the intrinsic's
// accumulator operand ties (two moves a vpdpbusd, 24 more instructions a step than the 12 that
// multiply).
template <int R>
__attribute__((target("avx2,avx512vl,avx512vnni"))) void vnni_block(const void* rows, int64_t lda, const void* weights, int64_t count,
                                                                  int32_t* c, int64_t ldc, int64_t cols, bool accumulate) {
  const uint8_t* a = static_cast<const uint8_t*>(rows);
  const int8_t* panel = static_cast<const int8_t*>(weights);
  __m256i sum[R][3];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 3
    for (int j = 0; j < 3; ++j) sum[r][j] = _mm256_setzero_si256();
  for (int64_t q = 0; q < count; ++q, panel += 4 * kColumns) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + 32));
    const __m256i b2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + 64));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      int32_t quad;
      std::memcpy(&quad, a + r * lda + 4 * q, sizeof quad);
      const __m256i x = _mm256_set1_epi32(quad);  // four u8 of row r
      // sum += four u8 of x times four s8 of b, summed, in each of the 8 lanes (AT&T order: s8, u8, sum)
      __asm__("vpdpbusd %1, %2, %0" : "+v"(sum[r][0]) : "v"(b0), "v"(x));
      __asm__("vpdpbusd %1, %2, %0" : "+v"(sum[r][1]) : "v"(b1), "v"(x));
      __asm__("vpdpbusd %1, %2, %0" : "+v"(sum[r][2]) : "v"(b2), "v"(x));
    }
  }
  store<R>(sum, c, ldc, cols, accumulate);
}

using Block = void (*)(const void*, int64_t, const void*, int64_t, int32_t*, int64_t, int64_t, bool);
constexpr Block kPairsBlocks[] = {nullptr, pairs_block<1>, pairs_block<2>, pairs_block<3>, pairs_block<4>};
constexpr Block kVnniBlocks[] = {nullptr,       vnni_block<1>, vnni_block<2>, vnni_block<3>, vnni_block<4>,
                                 vnni_block<5>, vnni_block<6>, vnni_block<7>, vnni_block<8>};

}  // namespace

void multiply(Kernel kernel, const Operand& a, int64_t m, const uint8_t* packed, int64_t k, int64_t n, int64_t first, int64_t last,
              int32_t* c, int64_t ldc) {
  const bool vnni = kernel == Kernel::Vnni;
  const int64_t size = group(kernel), element = vnni ? 1 : 2;
  const Block* blocks = vnni ? kVnniBlocks : kPairsBlocks;
  const int64_t block_rows = vnni ? 8 : 4;  // the micro-kernel's
  // A block of rows as the kernel takes them, depth(kernel) deep (a group's padding 0), kept between
  // calls: int16 less the zero point, or u8 (s8 shifted by +128) with the rows' sums.
  thread_local std::vector<uint8_t> rows;
  thread_local std::vector<int32_t> row_sums;
  const int64_t deep = depth(kernel);
  rows.resize(static_cast<size_t>(kRows * deep * element));
  row_sums.resize(static_cast<size_t>(kRows));
  const uint8_t flip = a.is_signed ? 0x80 : 0;
  for (int64_t r0 = 0; r0 < m; r0 += kRows) {
    const int64_t r1 = std::min(m, r0 + kRows);
    std::fill(row_sums.begin(), row_sums.end(), 0);
    for (int64_t k0 = 0; k0 < k; k0 += deep) {
      const int64_t along = std::min(deep, k - k0), width = groups(kernel, along) * size;
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* from = a.data + r * a.stride + k0;
        if (vnni) {
          uint8_t* to = rows.data() + (r - r0) * width;
          uint32_t sum = 0;  // modulo 2^32, as every sum here
          for (int64_t p = 0; p < along; ++p) sum += to[p] = from[p] ^ flip;
          std::fill(to + along, to + width, uint8_t{0});
          int32_t& total = row_sums[static_cast<size_t>(r - r0)];
          total = wrapped_add(total, static_cast<int32_t>(sum));
          continue;
        }
        int16_t* to = reinterpret_cast<int16_t*>(rows.data()) + (r - r0) * width;
        const int32_t zero = a.zero_points[a.per_row ? r : 0];
        if (a.is_signed)
          for (int64_t p = 0; p < along; ++p) to[p] = static_cast<int16_t>(static_cast<int8_t>(from[p]) - zero);
        else
          for (int64_t p = 0; p < along; ++p) to[p] = static_cast<int16_t>(from[p] - zero);
        if (along < width) to[along] = 0;
      }
      for (int64_t p = first / kColumns; p < panels(n) && p * kColumns < last; ++p) {
        const uint8_t* panel = packed + ((p * groups(kernel, k) + k0 / size) * kColumns) * group_bytes(kernel);
        const int64_t cols = std::min(kColumns, n - p * kColumns);
        for (int64_t r = r0; r < r1; r += block_rows) {
          const int64_t count = std::min(block_rows, r1 - r);
          blocks[count](rows.data() + (r - r0) * width * element, width, panel, width / size, c + r * ldc + p * kColumns, ldc, cols,
                        k0 > 0);
        }
      }
    }
    if (!vnni) continue;
    // The zero points off: - za · (sum b - K · zb) - zb · sum a, in u8 and s8 terms.
    const int32_t* columns = reinterpret_cast<const int32_t*>(packed + vnni_columns_at(k, n));
    for (int64_t r = r0; r < r1; ++r) {
      const int32_t zero = a.zero_points[a.per_row ? r : 0] + (a.is_signed ? 128 : 0), sum = row_sums[static_cast<size_t>(r - r0)];
      int32_t* to = c + r * ldc;
      for (int64_t j = first; j < last; ++j)
        to[j] = wrapped_sub(to[j], wrapped_add(wrapped_mul(zero, columns[2 * j]), wrapped_mul(columns[2 * j + 1], sum)));
    }
  }
}

#else

bool available(Kernel) { return false; }

void multiply(Kernel, const Operand&, int64_t, const uint8_t*, int64_t, int64_t, int64_t, int64_t, int32_t*, int64_t) {
  throw ir::Error(ir::ErrorCode::Internal, "cpu: the integer GEMM runs on x86-64 only");
}

#endif

}  // namespace esg::cpu::integer_gemm
