// GEMM for kernels other than matmul's own: rows of a product, for fused matmul epilogues.
#pragma once
#include <cstdint>

#include "eval/host_tensor.hpp"

namespace esg::cpu {

// Rows [first, last) of A·B into `out` (row-major, N floats a row): A is f32 [..., M, K] with
// its leading dimensions taken as more rows, B one f32 matrix [K, N] ([N, K] with
// `transpose_b`). `threads` for oneDNN's OpenMP.
void gemm_rows(const eval::TensorRef& a, const eval::TensorRef& b, bool transpose_b, int64_t first, int64_t last,
               float* out, int threads);

}  // namespace esg::cpu
