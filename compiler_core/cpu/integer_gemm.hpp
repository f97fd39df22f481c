// 8-bit products (ONNX's MatMulInteger: a dynamically quantized model's products) on a GEMM of
// our own for x86 CPUs with AVX2, exact in int32 on any of them. oneDNN's int8 kernels without
// VNNI multiply u8 by s8 with vpmaddubsw, which saturates each pair of products in 16 bits
// (docs/quantization.md); here both operands are widened to 16 bits less their zero points
// (at most 9 bits each) and multiplied with vpmaddwd, whose pairs of products sum exactly in
// 32 bits: as many products an instruction as f32's FMA, with half its weight bytes, and no
// zero-point corrections. The weights are packed once into panels of kColumns columns, K deep
// in pairs, less their zero points; A's rows are widened a block at a time as they are read.
#pragma once
#include <cstddef>
#include <cstdint>

namespace esg::cpu::integer_gemm {

constexpr int64_t kColumns = 24;  // a panel's width: three registers of 8 int32 sums

// Whether this CPU runs the kernel (AVX2).
bool available();

// The bytes of K x N weights packed.
size_t packed_bytes(int64_t k, int64_t n);

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

// Packs the K x N matrix `b` (row-major) into `into`, packed_bytes(k, n) bytes.
void pack(const Operand& b, int64_t k, int64_t n, uint8_t* into);

// c[i, j] = sum over p of a[i, p] · b[p, j] for rows [0, m) of `a` and the columns
// [first, last) of `packed` (first a multiple of kColumns), `c` pointing at the result's
// column 0 with `ldc` int32 a row. The sums wrap around as int32's. Only where available().
void multiply(const Operand& a, int64_t m, const uint8_t* packed, int64_t k, int64_t n, int64_t first, int64_t last, int32_t* c,
              int64_t ldc);

}  // namespace esg::cpu::integer_gemm
