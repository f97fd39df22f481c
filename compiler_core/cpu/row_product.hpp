// One row of activations times constant f32 weights, read where they lie (a decoder's token at
// batch 1): bound by streaming the weights from memory, not by arithmetic. oneDNN 2.6's gemm
// reached 18-19 GB/s there on a Zen 4 against ONNX Runtime's 25-28; packing the weights for our
// packed GEMM reached ONNX Runtime but keeps a second copy of them (bench/RESULTS.md). These
// kernels read the constant in place, each weight once, in the order it lies in memory: K x N
// row-major a few rows of K at a time across a tile of columns, or, transposed (N x K, ONNX's
// Gemm transB and PyTorch's Linear), a few columns' rows of K at a time.
#pragma once
#include <cstdint>

namespace esg::cpu::row_product {

// Whether this CPU runs them (AVX2 and FMA).
bool available();

// y[j] = Σ_k x[k] · w(k, j) for j in [0, n): `w` is K x N' row-major with `ldw` floats a row (its
// first n columns taken), or, `transposed`, N' x K row-major with `ldw` floats a row (its first
// n rows taken). Only where available().
void multiply(const float* x, int64_t k, const float* w, int64_t ldw, bool transposed, int64_t n, float* y);

}  // namespace esg::cpu::row_product
