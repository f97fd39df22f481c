// Weight-only quantization: each product's constant weights as codes of 2, 4 or 8 bits in blocks
// along K with a scale and zero point each (ONNX Runtime's MatMulNBits layout), read by
// matmul_nbits where the f32 matmul was. No calibration: the activations stay f32.
#pragma once
#include <cstdint>
#include <vector>

#include "quantize/qdq.hpp"

namespace esg::quantize {

// A weight matrix's columns in blocks: codes [N, blocks, block_size · bits / 8] packed along K, low
// bits first (zero codes past K); scales and zero points [N, blocks] (no zero points when
// symmetric: the code 2^(bits-1) stands for 0). A block's range is [min(lo, 0), max(hi, 0)] over
// the codes, or symmetric [-m, m] around 2^(bits-1); codes round half to even, saturated.
struct Blockwise {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  std::vector<uint8_t> zero_points;
  int64_t blocks = 0;
};
// w is [K, N] row-major, or [N, K] when `transposed`.
Blockwise quantize_blockwise(const float* w, int64_t k, int64_t n, bool transposed, int bits, int64_t block_size, bool symmetric);

// The graph with each matmul site of `sites` (others are ignored) on matmul_nbits.
Rewritten weight_only(const ir::Graph& g, const Sites& sites, int bits, int64_t block_size, bool symmetric);

}  // namespace esg::quantize
