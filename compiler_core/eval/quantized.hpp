// The quantized products' reference: exact int32 sums of zero-point-shifted integers, then the
// requantization ONNX Runtime applies (ONNX's QLinearConv). The CPU backend's int8 primitives
// take the same multipliers from here, so both requantize with one definition.
#pragma once
#include <cstdint>
#include <vector>

#include "eval/host_tensor.hpp"
#include "eval/kernels.hpp"

namespace esg::eval {

// What an int32 sum becomes: saturate(round(f32(sum) · m) + zero_point), m = x_scale · w_scale /
// y_scale in f32 (one per output channel, or one in all), rounded half to even, and with
// `relu` no lower than the zero point (the quantized 0.0).
struct Requantization {
  std::vector<float> multiplier;
  int64_t zero_point = 0;
  IntRange range{0, 255};
  bool relu = false;

  int64_t apply(int32_t sum, int64_t channel) const;
};

// From a quantized product's one-value x_scale and y_scale, its w_scale (one value or one per
// channel), and its output zero point (whose dtype is the output's).
Requantization requantization(const TensorRef& x_scale, const TensorRef& w_scale, const TensorRef& y_scale,
                              const TensorRef& y_zero_point, bool relu);

void quantized_conv2d(const KernelCall& c);

}  // namespace esg::eval
