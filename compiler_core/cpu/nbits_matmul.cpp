// matmul_nbits (weight-only quantization: a decoder's products at batch 1, bound by the bytes
// of their weights) on x86 CPUs with AVX2 and FMA: the codes are read as they lie in b, never
// widened into a copy of the weights, so a step reads 1/8 (4 bits) or 1/4 (8 bits) of an f32
// model's weight bytes.
//
// For column j, w[k][j] = (code - zero) · scale with one scale and zero a block, so
//     y[r][j] = sum over blocks of scale · (sum over the block of a[r][k] · code) - scale · zero · asum[r][block]
// where asum is the block's sum of a's row: the inner sums multiply the codes as they are, and
// the zero points cost one multiply-add a block. Each 8 codes become floats in one register
// (eight_codes), multiplied with 8 of a row's values by one FMA a row; up to 4 rows or 4
// columns at once share the loads. From kDequantizedRows rows on (a prompt's prefill), columns
// are dequantized a tile at a time onto the f32 packed GEMM instead.
//
// With accuracy_level 4 (ONNX Runtime's leave to multiply a in int8), 4-bit codes in blocks of
// multiples of 32 are multiplied in integers on AVX512-VNNI: a's rows are rounded to int8, 32
// values to a scale s_c, and each 64 codes of a column (32 bytes: one load, two masks) meet them
// in two vpdpbusd (the codes unsigned, a's values signed, 4 products a lane), whose 8 lanes hold
// two 32-value sums:
//     y[r][j] = sum over c of scale(b(c)) · s_c · (sum of code · q) - sum over b of scale · zero · (sum over c in b of s_c · sum q)
// a conversion and an FMA each 64 codes where the f32 path converts 8 times and takes 8 FMAs.
// 8-bit codes stay on the f32 path: their bytes, not their conversions, bound it (measured: no
// faster in int8).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/fast_kernels.hpp"
#include "cpu/packed_gemm.hpp"
#include "cpu/split.hpp"
#include "eval/host_tensor.hpp"
#include "ir/op_attrs.gen.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace esg::cpu {

#if defined(__x86_64__)
namespace {

constexpr int64_t kTileBytes = 32 << 10;  // the columns' codes that stay in L1 while every row passes them

// What one launch multiplies: a's rows in the order the codes come in (`rows`, `padded` floats
// each), their blocks' sums (`blocks` a row: of a's values, or in int8 of each 32-value piece's
// s_c · sum q), and b's columns.
struct Operands {
  const float* rows;
  const float* block_sums;
  int64_t padded, blocks, block_size, block_bytes;
  const uint8_t* codes;
  int64_t columns;
  const float* scales;
  const uint8_t* zero_points;  // null: 2^(bits-1)
  // accuracy_level 4: a's rows in int8 (quantize_rows), `groups` of 64 values a row
  const int8_t* quantized;
  const float* lane_scales;  // 8 a group: its two 32-value scales, each for 4 lanes
  int64_t groups;
};

__attribute__((target("avx2,fma"))) inline float horizontal_sum(__m256 v) {
  const __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 pair = _mm_add_ps(half, _mm_movehl_ps(half, half));
  return _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)));
}

// The 8 codes of `Bits` bits at `at` as floats, in lanes 0-7, by shifting their bytes copied into
// every lane: no shuffle across the register's halves (as vpmovzxbd's widening would be). 8 bits
// take two 32-bit words, word i % 2 in lane i, so lane i holds code i % 2 · 4 + i / 2 (the
// order a's rows are permuted into).
template <int Bits>
__attribute__((target("avx2,fma"))) inline __m256 eight_codes(const uint8_t* at) {
  // Broadcasts straight from memory: load-port work only.
  __m256i words;
  if constexpr (Bits == 8) {
    words = _mm256_castpd_si256(_mm256_broadcast_sd(reinterpret_cast<const double*>(at)));
  } else if constexpr (Bits == 4) {
    words = _mm256_castps_si256(_mm256_broadcast_ss(reinterpret_cast<const float*>(at)));
  } else {
    int16_t pair;  // 2 bytes: no read past the codes' end
    std::memcpy(&pair, at, sizeof pair);
    words = _mm256_set1_epi16(pair);  // each 32-bit lane the 16 bits twice; shifts below 16 read the first copy
  }
  const __m256i shifts = Bits == 8 ? _mm256_setr_epi32(0, 0, 8, 8, 16, 16, 24, 24) : _mm256_setr_epi32(0, 1 * Bits, 2 * Bits, 3 * Bits, 4 * Bits, 5 * Bits, 6 * Bits, 7 * Bits);
  const __m256i codes = _mm256_and_si256(_mm256_srlv_epi32(words, shifts), _mm256_set1_epi32((1 << Bits) - 1));
  return _mm256_cvtepi32_ps(codes);
}

// Where C columns from `column` keep their codes, scales and zero points (null: 2^(bits-1)).
template <int C>
struct ColumnsAt {
  const uint8_t* codes[C];
  const float* scales[C];
  const uint8_t* zeros[C];
  ColumnsAt(const Operands& o, int64_t column) {
    const int64_t column_bytes = o.blocks * o.block_bytes;
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      codes[c] = o.codes + (column + c) * column_bytes;
      scales[c] = o.scales + (column + c) * o.blocks;
      zeros[c] = o.zero_points ? o.zero_points + (column + c) * o.blocks : nullptr;
    }
  }
};

// y[r][j] for R rows from `row` and C columns from `column` (`ldy` floats a row of y). The
// unroll pragmas keep the R x C sums in registers.
template <int Bits, int R, int C>
__attribute__((target("avx2,fma"))) void tile(const Operands& o, int64_t row, int64_t column, float* y, int64_t ldy) {
  // Every address from pointers that step along: the operands' fields read once (b's bytes
  // may alias them, as far as the compiler knows).
  const int64_t blocks = o.blocks, block_size = o.block_size, block_bytes = o.block_bytes, column_bytes = blocks * block_bytes;
  const float zero_default = static_cast<float>(1 << (Bits - 1));
  ColumnsAt<C> at(o, column);
  const uint8_t** codes = at.codes;
  const float* const* scales = at.scales;
  const uint8_t* const* zeros = at.zeros;
  const float *x[R], *sums[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    x[r] = o.rows + (row + r) * o.padded;
    sums[r] = o.block_sums + (row + r) * blocks;
  }
  __m256 total[R][C];
  float correction[R][C] = {};
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) total[r][c] = _mm256_setzero_ps();
  // The next C columns' codes (they follow these in memory), C blocks' worth a block, so that
  // they are in cache when the next tile starts: a thread's stream of codes is bound by the
  // memory's latency, not its bandwidth, otherwise.
  int64_t next = (column + C) * column_bytes;  // offsets in b: no pointer past its end
  const int64_t end = o.columns * column_bytes;
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t line = 0; line < C * block_bytes && next + line < end; line += 64)
      _mm_prefetch(reinterpret_cast<const char*>(o.codes + next + line), _MM_HINT_T0);
    next += C * block_bytes;
    __m256 block[R][C];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) block[r][c] = _mm256_setzero_ps();
    for (int64_t g = 0; g < block_size; g += 8) {  // 8 codes at a time
      __m256 values[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) values[r] = _mm256_loadu_ps(x[r] + g);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        const __m256 eight = eight_codes<Bits>(codes[c] + g * Bits / 8);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) block[r][c] = _mm256_fmadd_ps(eight, values[r], block[r][c]);
      }
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const float zero = (zeros[c] ? static_cast<float>(zeros[c][b]) : zero_default) * scales[c][b];
      const __m256 scale = _mm256_broadcast_ss(scales[c] + b);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        total[r][c] = _mm256_fmadd_ps(scale, block[r][c], total[r][c]);
        correction[r][c] += zero * sums[r][b];
      }
      codes[c] += block_bytes;
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) x[r] += block_size;
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) y[(row + r) * ldy + column + c] = horizontal_sum(total[r][c]) - correction[r][c];
}

// ---- accuracy_level 4 -----------------------------------------------------------------------
#define ESG_VNNI_TARGET __attribute__((target("avx2,fma,avx512f,avx512vl,avx512bw,avx512vnni")))

bool integer_rows_available() {
  return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
}

// Where value i of a row's 32-value piece `half` (0 or 1 of its 64-value group) goes among the
// group's 64 bytes: the first 32 meet the low nibbles (even codes) in the first vpdpbusd, the
// rest the high ones, each half of a register one piece (see group_codes).
inline int64_t quantized_at(int64_t half, int64_t i) { return (i % 2) * 32 + half * 16 + i / 2; }

// a's rows rounded to int8, 32 values to a scale, laid out for integer_tile; zeros past K.
// False for rows holding an infinity or a NaN, which no scale rounds: the f32 path takes them.
bool quantize_rows(const float* a, int64_t rows, int64_t k, int64_t padded, int64_t block_size, int64_t blocks, int64_t groups,
                   std::vector<int8_t>& quantized, std::vector<float>& lane_scales, std::vector<float>& sums) {
  quantized.assign(static_cast<size_t>(rows * groups * 64), 0);
  lane_scales.assign(static_cast<size_t>(rows * groups * 8), 0.0f);
  sums.assign(static_cast<size_t>(rows * blocks), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = a + r * k;
    for (int64_t piece = 0; piece < padded / 32; ++piece) {
      const int64_t from = piece * 32, count = std::clamp<int64_t>(k - from, 0, 32);
      float largest = 0.0f;
      for (int64_t i = 0; i < count; ++i) {
        if (!std::isfinite(row[from + i])) return false;
        largest = std::max(largest, std::fabs(row[from + i]));
      }
      // the inverse in double: 127 / a tiny largest overflows a float
      const float scale = largest / 127.0f;
      const double inverse = largest > 0.0f ? 127.0 / largest : 0.0;
      int8_t* group = quantized.data() + (r * groups + piece / 2) * 64;
      int64_t total = 0;
      for (int64_t i = 0; i < count; ++i) {
        const auto q = static_cast<int8_t>(std::clamp(std::nearbyint(row[from + i] * inverse), -127.0, 127.0));
        group[quantized_at(piece % 2, i)] = q;
        total += q;
      }
      std::fill_n(lane_scales.data() + (r * groups + piece / 2) * 8 + piece % 2 * 4, 4, scale);
      sums[static_cast<size_t>(r * blocks + from / block_size)] += scale * static_cast<float>(total);
    }
  }
  return true;
}

// The codes of a column's 64-value group (32 bytes at `at`) as the two registers vpdpbusd
// takes: the low nibbles, then the high ones (bytes 0-15 of each the first 32-value piece's,
// 16-31 the second's). `Tail`: the last group, holding one piece only (16 bytes, no read past).
template <bool Tail>
ESG_VNNI_TARGET inline void group_codes(const uint8_t* at, __m256i& first, __m256i& second) {
  const __m256i bytes = Tail ? _mm256_maskz_loadu_epi8(0xFFFF, at) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at));
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  first = _mm256_and_si256(bytes, nibble);
  second = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), nibble);
}

// A column's scales for group g, each for the 4 lanes of its 32-value piece: blocks of 32
// (`Paired`) give the group two, larger blocks one.
template <bool Paired, bool Tail>
ESG_VNNI_TARGET inline __m256 group_scales(const float* scales, int64_t g, int64_t block_size) {
  if constexpr (Paired && !Tail) {
    const __m128 two = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(scales + 2 * g)));
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(two), _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
  } else {
    return _mm256_set1_ps(scales[g * 64 / block_size]);
  }
}

// One 64-value group of R rows and C columns into `total`.
template <bool Paired, bool Tail, int R, int C>
ESG_VNNI_TARGET inline void integer_group(const uint8_t* const* codes, const float* const* scales, const int8_t* const* values,
                                          const float* const* lanes, int64_t g, int64_t block_size, __m256 (&total)[R][C]) {
  __m256i first[C], second[C];
  __m256 column_scale[C];
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c) {
    group_codes<Tail>(codes[c] + g * 32, first[c], second[c]);
    column_scale[c] = group_scales<Paired, Tail>(scales[c], g, block_size);
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values[r] + g * 64));
    const __m256i q1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values[r] + g * 64 + 32));
    const __m256 row_scale = _mm256_loadu_ps(lanes[r] + g * 8);
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const __m256i sum = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), first[c], q0), second[c], q1);
      total[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(column_scale[c], row_scale), total[r][c]);
    }
  }
}

// y[r][j] for R rows from `row` and C columns from `column` of 4-bit codes, a in int8 (see the
// file's top).
template <bool Paired, int R, int C>
ESG_VNNI_TARGET void integer_tile(const Operands& o, int64_t row, int64_t column, float* y, int64_t ldy) {
  const int64_t blocks = o.blocks, column_bytes = blocks * o.block_bytes, groups = o.groups;
  const int64_t whole = o.padded / 64, group_bytes = 32;
  const float zero_default = 8.0f;
  const ColumnsAt<C> at(o, column);
  const uint8_t* const* codes = at.codes;
  const float* const* scales = at.scales;
  const uint8_t* const* zeros = at.zeros;
  const int8_t* values[R];
  const float *lanes[R], *sums[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    values[r] = o.quantized + (row + r) * groups * 64;
    lanes[r] = o.lane_scales + (row + r) * groups * 8;
    sums[r] = o.block_sums + (row + r) * blocks;
  }
  __m256 total[R][C];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) total[r][c] = _mm256_setzero_ps();
  int64_t next = (column + C) * column_bytes;  // the next columns' codes, fetched as these are summed (see tile)
  const int64_t end = o.columns * column_bytes;
  for (int64_t g = 0; g < whole; ++g) {
    for (int64_t line = 0; line < C * group_bytes && next + line < end; line += 64)
      _mm_prefetch(reinterpret_cast<const char*>(o.codes + next + line), _MM_HINT_T0);
    next += C * group_bytes;
    integer_group<Paired, false, R, C>(codes, scales, values, lanes, g, o.block_size, total);
  }
  if (whole < groups) integer_group<Paired, true, R, C>(codes, scales, values, lanes, whole, o.block_size, total);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      float correction = 0.0f;
      for (int64_t b = 0; b < blocks; ++b)
        correction += (zeros[c] ? static_cast<float>(zeros[c][b]) : zero_default) * scales[c][b] * sums[r][b];
      y[(row + r) * ldy + column + c] = horizontal_sum(total[r][c]) - correction;
    }
}

// The tile kernels columns() runs: f32 a (tile), or int8 a and 4-bit codes (integer_tile).
template <int Bits>
struct FloatTiles {
  template <int R, int C>
  static void run(const Operands& o, int64_t row, int64_t column, float* y, int64_t ldy) { tile<Bits, R, C>(o, row, column, y, ldy); }
};
template <bool Paired>
struct IntegerTiles {
  template <int R, int C>
  static void run(const Operands& o, int64_t row, int64_t column, float* y, int64_t ldy) { integer_tile<Paired, R, C>(o, row, column, y, ldy); }
};

// Columns [first, last) of rows [0, rows): tiles of columns whose codes stay in L1 while
// groups of up to 4 rows pass them; within a group, as many columns at once as keep 4 sums.
template <class Tiles>
void columns(const Operands& o, int64_t rows, int64_t first, int64_t last, float* y, int64_t ldy) {
  const int64_t tile_columns = std::max<int64_t>(4, kTileBytes / std::max<int64_t>(1, o.blocks * o.block_bytes) / 4 * 4);
  for (int64_t from = first; from < last; from += tile_columns) {
    const int64_t to = std::min(last, from + tile_columns);
    for (int64_t r = 0; r < rows;) {
      const int64_t left = rows - r;
      int64_t j = from;
      if (left >= 4) {
        for (; j < to; ++j) Tiles::template run<4, 1>(o, r, j, y, ldy);
        r += 4;
      } else if (left == 3) {
        for (; j < to; ++j) Tiles::template run<3, 1>(o, r, j, y, ldy);
        r += 3;
      } else if (left == 2) {
        for (; j + 2 <= to; j += 2) Tiles::template run<2, 2>(o, r, j, y, ldy);
        for (; j < to; ++j) Tiles::template run<2, 1>(o, r, j, y, ldy);
        r += 2;
      } else {
        for (; j + 4 <= to; j += 4) Tiles::template run<1, 4>(o, r, j, y, ldy);
        for (; j < to; ++j) Tiles::template run<1, 1>(o, r, j, y, ldy);
        r += 1;
      }
    }
  }
}

// Columns [first, last) of w dequantized into `into`, one row of K floats a column (the product's
// b transposed), as the reference's (code - zero point) · scale.
template <int Bits>
__attribute__((target("avx2,fma"))) void dequantize(const Operands& o, int64_t k, int64_t first, int64_t last, float* into) {
  const float zero_default = static_cast<float>(1 << (Bits - 1));
  std::vector<float> block(static_cast<size_t>(o.block_size));
  for (int64_t j = first; j < last; ++j, into += k)
    for (int64_t b = 0; b < o.blocks; ++b) {
      const int64_t at = j * o.blocks + b, start = b * o.block_size, count = std::min(o.block_size, k - start);
      const __m256 scale = _mm256_set1_ps(o.scales[at]);
      const __m256 zero = _mm256_set1_ps(o.zero_points ? static_cast<float>(o.zero_points[at]) : zero_default);
      const uint8_t* codes = o.codes + at * o.block_bytes;
      float* to = count == o.block_size ? into + start : block.data();  // the last block: only K - start of it
      for (int64_t g = 0; g < o.block_size; g += 8) {
        const __m256 eight = Bits == 8 ? _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + g))))
                                       : eight_codes<Bits>(codes + g * Bits / 8);  // in order below 8 bits
        _mm256_storeu_ps(to + g, _mm256_mul_ps(_mm256_sub_ps(eight, zero), scale));
      }
      if (to == block.data()) std::copy(block.begin(), block.begin() + count, into + start);
    }
}

// Rows from which a product dequantizes its weights a tile of columns at a time and multiplies
// them on the f32 packed GEMM (a prompt's prefill), rather than converting codes for each 4
// rows: there the conversions cost more than the products.
constexpr int64_t kDequantizedRows = 16;

// Many rows: tiles of packed_gemm::kColumns columns dequantized, packed and multiplied with
// every row, on the calling thread.
void dequantized_columns(const Operands& o, int64_t bits, const float* a, int64_t rows, int64_t k, int64_t first, int64_t last,
                         float* y, int64_t ldy) {
  thread_local std::vector<float> columns, panel;
  for (int64_t from = first; from < last; from += packed_gemm::kColumns) {
    const int64_t to = std::min(last, from + packed_gemm::kColumns), width = to - from;
    columns.resize(static_cast<size_t>(width * k));
    if (bits == 8) dequantize<8>(o, k, from, to, columns.data());
    else if (bits == 4) dequantize<4>(o, k, from, to, columns.data());
    else dequantize<2>(o, k, from, to, columns.data());
    panel.resize(packed_gemm::packed_bytes(k, width) / sizeof(float));
    packed_gemm::pack(columns.data(), k, true, k, width, panel.data());
    packed_gemm::multiply(a, k, rows, panel.data(), k, width, y + from, ldy);
  }
}

void run(const eval::KernelCall& c) {
  const eval::TensorRef &a = *c.in[0], &b = *c.in[1], &scales = *c.in[2], &y = *c.out[0];
  const ir::MatmulNbitsAttrs attrs = c.attrs<ir::MatmulNbitsAttrs>();
  const int64_t k = a.shape[a.shape.rank() - 1], n = b.shape[0], blocks = b.shape[1], block_bytes = b.shape[2];
  const int64_t bits = attrs.bits, block_size = attrs.block_size, padded = blocks * block_size;
  const int64_t rows = n ? y.size() / n : 0;
  if (rows == 0 || n == 0) return;
  const bool dequantized = rows >= kDequantizedRows && k > 0;
  bool integer = !dequantized && attrs.accuracy_level == 4 && bits == 4 && block_size % 32 == 0 && integer_rows_available();
  // Few rows: a's rows padded with zeros past K (the padding codes'), each 8 values in the order
  // the codes come in (eight_codes), and each block's sum; or, in int8, as quantize_rows lays them.
  thread_local std::vector<float> permuted, sums, lane_scales;
  thread_local std::vector<int8_t> quantized;
  const int64_t groups = (padded + 63) / 64;
  if (integer) integer = quantize_rows(a.data<float>(), rows, k, padded, block_size, blocks, groups, quantized, lane_scales, sums);
  if (!integer && !dequantized) {
    permuted.assign(static_cast<size_t>(rows * padded), 0.0f);
    sums.assign(static_cast<size_t>(rows * blocks), 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
      const float* from = a.data<float>() + r * k;
      float* into = permuted.data() + r * padded;
      for (int64_t p = 0; p < k; ++p) {
        into[bits == 8 ? p / 8 * 8 + p % 4 * 2 + p % 8 / 4 : p] = from[p];
        sums[static_cast<size_t>(r * blocks + p / block_size)] += from[p];
      }
    }
  }
  const Operands o{permuted.data(), sums.data(), padded, blocks, block_size, block_bytes, b.data<uint8_t>(), n, scales.data<float>(),
                   c.in[3] ? c.in[3]->data<uint8_t>() : nullptr, quantized.data(), lane_scales.data(), groups};
  auto share = [&](int64_t first, int64_t last) {
    float* out = y.data<float>();
    const bool paired = block_size == 32;
    if (dequantized) dequantized_columns(o, bits, a.data<float>(), rows, k, first, last, out, n);
    else if (integer && paired) columns<IntegerTiles<true>>(o, rows, first, last, out, n);
    else if (integer) columns<IntegerTiles<false>>(o, rows, first, last, out, n);
    else if (bits == 8) columns<FloatTiles<8>>(o, rows, first, last, out, n);
    else if (bits == 4) columns<FloatTiles<4>>(o, rows, first, last, out, n);
    else columns<FloatTiles<2>>(o, rows, first, last, out, n);
  };
  // Columns in shares of whole tiles, each thread reading its share of the weights.
  const int64_t tile = dequantized ? packed_gemm::kColumns : 4, tiles = (n + tile - 1) / tile;
  const int64_t pieces = std::min<int64_t>(tiles, pieces_for_macs(static_cast<double>(rows) * static_cast<double>(k) * static_cast<double>(n),
                                                                   c.parallel ? c.parallel->threads() : 1, kMinProductMacsPerPiece));
  if (pieces <= 1) return share(0, n);
  c.parallel->run(pieces, [&](int64_t p) { share(std::min(n, tiles * p / pieces * tile), std::min(n, tiles * (p + 1) / pieces * tile)); });
}

}  // namespace

eval::Kernel nbits_matmul_kernel(const ir::Graph& g, const ir::Node& n) {
  // f16 and bf16 activations (Ascend's form) run on the reference kernel.
  if (n.op->kind != ir::OpKind::matmul_nbits || g.values[n.first_output].dtype != ir::DType::F32 || !__builtin_cpu_supports("avx2") ||
      !__builtin_cpu_supports("fma"))
    return nullptr;
  return run;
}

#else

eval::Kernel nbits_matmul_kernel(const ir::Graph&, const ir::Node&) { return nullptr; }

#endif

}  // namespace esg::cpu
