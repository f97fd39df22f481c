// The quantized products' reference: exact int32 sums of zero-point-shifted integers, then the
// requantization ONNX Runtime applies (ONNX's QLinearConv). The CPU backend's int8 primitives
// take the same multipliers from here, so both requantize with one definition.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "eval/host_tensor.hpp"
#include "eval/kernels.hpp"

namespace esg::eval {

// What an int32 sum becomes: round(f32(sum) · m) + zero_point, m = x_scale · w_scale / y_scale
// in f32 (one per output channel, or one in all), rounded half to even, clamped to [low, high]:
// the output dtype's range, narrowed by a clip of the real result folded in.
struct Requantization {
  std::vector<float> multiplier;
  int64_t zero_point = 0;
  int64_t low = 0, high = 255;

  int64_t apply(int32_t sum, int64_t channel) const;
};

// From a quantized product's one-value x_scale and y_scale, its w_scale (one value or one per
// channel), its output zero point (whose dtype is the output's) and the clip [min, max] of its
// real result (±inf: none).
Requantization requantization(const TensorRef& x_scale, const TensorRef& w_scale, const TensorRef& y_scale,
                              const TensorRef& y_zero_point, double min, double max);

// The same for a float result (a float zero point): f32(sum) · multiplier + zero point, clamped
// to the clip's bounds in the result's units, not rounded.
struct RealResult {
  std::vector<float> multiplier;
  float zero_point = 0, low = -INFINITY, high = INFINITY;

  float apply(int32_t sum, int64_t channel) const;
};
RealResult real_result(const TensorRef& x_scale, const TensorRef& w_scale, const TensorRef& y_scale, const TensorRef& y_zero_point,
                       double min, double max);

void quantized_conv2d(const KernelCall& c);
// ONNX's MatMulInteger: int32 sums of zero-point-shifted 8-bit products, wrapping as int32.
void matmul_integer(const KernelCall& c);

// Code k of a column of matmul_nbits's b (`column`: its blocks, `block_bytes` each): the codes
// lie along K, `bits` bits each, low bits first.
inline int32_t nbits_code(const uint8_t* column, int64_t k, int64_t bits, int64_t block_bytes, int64_t block_size) {
  const int64_t at = k % block_size * bits;
  return column[k / block_size * block_bytes + at / 8] >> (at % 8) & ((1 << bits) - 1);
}

// ONNX Runtime's MatMulNBits: a times the weights b's codes stand for, summed in f64.
void matmul_nbits(const KernelCall& c);

}  // namespace esg::eval
