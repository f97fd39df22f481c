// 8-bit products (ONNX's MatMulInteger: a dynamically quantized model's products) on a GEMM of
// our own for x86 CPUs with AVX2, exact in int32 on any of them. oneDNN's int8 kernels without
// VNNI multiply u8 by s8 with vpmaddubsw, which saturates each pair of products in 16 bits
// (docs/quantization.md); here both operands are widened to 16 bits less their zero points
// (at most 9 bits each) and multiplied with vpmaddwd, whose pairs of products sum exactly in
// 32 bits: as many products an instruction as f32's FMA, with half its weight bytes, and no
// zero-point corrections. The weights are packed once into panels of kColumns columns, K deep
// in pairs, less their zero points; A's rows are widened a block at a time as they are read.
//
// On CPUs with AVX512-VNNI, vpdpbusd multiplies u8 by s8 and sums each four products in 32 bits,
// exactly: twice vpmaddwd's products an instruction, at 1 byte a weight. Its operands must be
// u8 and s8, so s8 rows are shifted into u8 (+128) and u8 weights into s8 (-128) as they are
// copied, their zero points with them, and the zero points come off after the sums:
//     sum (a - za)(b - zb) = sum a·b - za · sum b - zb · sum a + K · za · zb
// with the columns' sums of b taken when packing and the rows' sums of a as they are copied.
// Every sum wraps modulo 2^32, so the result is int32's wrap-around of the exact one either way.
#pragma once
#include <cstddef>
#include <cstdint>

namespace esg::cpu::integer_gemm {

constexpr int64_t kColumns = 24;  // a panel's width: three registers of 8 int32 sums

// The instructions that multiply: AVX2's vpmaddwd on int16 pairs, or AVX512-VNNI's vpdpbusd on
// bytes four at a time. The packed weights differ (and differ in size).
enum class Kernel { Pairs, Vnni };

// Whether this CPU runs `kernel` (AVX2; AVX512-VNNI and AVX512-VL).
bool available(Kernel kernel = Kernel::Pairs);

// The bytes of K x N weights packed for `kernel`.
size_t packed_bytes(Kernel kernel, int64_t k, int64_t n);

// 8-bit integers less their zero points: u8, or s8 when `is_signed`, `stride` bytes a row;
// `zero_points` holds one value, or one per row (`per_row`) or column of the matrix.
struct Operand {
  const uint8_t* data = nullptr;
  bool is_signed = false;
  int64_t stride = 0;
  const int32_t* zero_points = nullptr;
  bool per_row = false;
  bool per_column = false;
};

// Packs the K x N matrix `b` (row-major) into `into`, packed_bytes(kernel, k, n) bytes.
void pack(Kernel kernel, const Operand& b, int64_t k, int64_t n, uint8_t* into);

// c[i, j] = sum over p of a[i, p] · b[p, j] for rows [0, m) of `a` and the columns
// [first, last) of `packed` (first a multiple of kColumns), `c` pointing at the result's
// column 0 with `ldc` int32 a row. The sums wrap around as int32's. Only where available(kernel).
void multiply(Kernel kernel, const Operand& a, int64_t m, const uint8_t* packed, int64_t k, int64_t n, int64_t first, int64_t last,
              int32_t* c, int64_t ldc);

}  // namespace esg::cpu::integer_gemm
