// GEMM for the CPU kernels: one call into oneDNN for everything (matmul, fused matmul
// epilogues, convolution).
#pragma once
#include <algorithm>
#include <cstdint>

#include "eval/host_tensor.hpp"
#include "eval/kernels.hpp"

namespace esg::cpu {

// Below this many multiply-adds per thread a GEMM stays on the calling thread: a block handed to
// a pool thread pays its wake-up and reads its operands into another core's cache, which a
// small GEMM never earns back.
constexpr int64_t kMinGemmMacsPerThread = int64_t{1} << 22;

// The threads for a product of `macs` multiply-adds: one per
// kMinGemmMacsPerThread of them, at least 1, at most `threads`.
inline int threads_for_macs(double macs, int threads) {
  return static_cast<int>(std::clamp<double>(macs / kMinGemmMacsPerThread, 1, std::max(threads, 1)));
}

// c[m, n] = op(a)[m, k] · op(b)[k, n], row-major with leading dimensions lda, ldb, ldc; op
// transposes with ta / tb. Split over `parallel`'s free threads when large (null: one thread).
void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
           float* c, int64_t ldc, const eval::Parallel* parallel);

// Rows [first, last) of A·B into `out` (row-major, N floats a row): A is f32 [..., M, K] with
// its leading dimensions taken as more rows, B one f32 matrix [K, N] ([N, K] with
// `transpose_b`). Split over `parallel` as sgemm.
void gemm_rows(const eval::TensorRef& a, const eval::TensorRef& b, bool transpose_b, int64_t first, int64_t last,
               float* out, const eval::Parallel* parallel);

}  // namespace esg::cpu
