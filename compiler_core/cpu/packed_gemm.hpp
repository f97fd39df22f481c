// f32 products with constant weights on a GEMM of our own, for x86 CPUs with AVX2 and FMA but
// not AVX-512, in calls of a few rows (a recurrent layer's steps, a small batch). There oneDNN
// 2.6 has no brgemm, only its gemm, which takes a plain matrix and packs it again at every
// call: for a few rows that costs as much as the product (8 x 256 x 1024 in 0.045 ms here
// against 0.076-0.19 ms, one thread, bench/RESULTS.md), from 64 rows on nothing measurable, and
// oneDNN 3.x's brg_matmul:avx2 is no faster than 2.6's gemm. The weights are packed once, when
// the plan is lowered, into panels of kColumns columns, each K rows deep and zero-padded; the
// rows of A are read where they lie. A micro-kernel keeps a 4 x 24 block of C in twelve
// registers; blocks of K and of rows keep a panel in L1 and the rows it meets in L2.
#pragma once
#include <cstddef>
#include <cstdint>

namespace esg::cpu::packed_gemm {

constexpr int64_t kColumns = 24;  // a panel's width: three 8-float registers

// Whether this CPU runs the kernel (AVX2 and FMA).
bool available();

// The bytes of K x N weights packed.
size_t packed_bytes(int64_t k, int64_t n);

// Packs N columns of B into `into` (packed_bytes(k, n)): B is K x N' row-major
// with `ldb` floats a row (its first N columns taken), or, `transposed`, N' x K row-major with
// `ldb` floats a row (its first N rows taken).
void pack(const float* b, int64_t ldb, bool transposed, int64_t k, int64_t n, float* into);

// c[m, n] = a[m, k] · B on the calling thread: `a` with `lda` floats a row, `c` with `ldc`,
// `packed` as pack wrote it. Only where available().
void multiply(const float* a, int64_t lda, int64_t m, const float* packed, int64_t k, int64_t n, float* c, int64_t ldc);

}  // namespace esg::cpu::packed_gemm
