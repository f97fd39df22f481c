#include "eval/quantized.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "eval/host_tensor.hpp"
#include "eval/indexing.hpp"
#include "eval/scalar_math.hpp"
#include "ir/op_attrs.gen.hpp"

namespace esg::eval {

int64_t Requantization::apply(int32_t sum, int64_t channel) const {
  const float m = multiplier[multiplier.size() == 1 ? 0 : static_cast<size_t>(channel)];
  // Beyond ±2^40 every 8-bit result saturates alike: the bound keeps the conversion defined.
  // A NaN (a scale of 0 or NaN) is 0, as every float-to-integer conversion here.
  const float scaled = std::clamp(std::nearbyint(static_cast<float>(sum) * m), -0x1p40f, 0x1p40f);
  return std::clamp(e_result<int64_t>(scaled) + zero_point, low, high);
}

float RealResult::apply(int32_t sum, int64_t channel) const {
  const float m = multiplier[multiplier.size() == 1 ? 0 : static_cast<size_t>(channel)];
  return std::clamp(static_cast<float>(sum) * m + zero_point, low, high);
}

namespace {

// x_scale · w_scale / y_scale per output channel (or one in all), each step rounded to f32 as
// ONNX Runtime's.
std::vector<float> multipliers(const TensorRef& x_scale, const TensorRef& w_scale, const TensorRef& y_scale) {
  const float xs = static_cast<float>(load_f(x_scale, 0)), ys = static_cast<float>(load_f(y_scale, 0));
  std::vector<float> m;
  for (int64_t c = 0; c < w_scale.size(); ++c) m.push_back(xs * static_cast<float>(load_f(w_scale, c)) / ys);
  return m;
}

}  // namespace

RealResult real_result(const TensorRef& x_scale, const TensorRef& w_scale, const TensorRef& y_scale, const TensorRef& y_zero_point,
                       double min, double max) {
  RealResult r;
  const float ys = static_cast<float>(load_f(y_scale, 0));
  r.multiplier = multipliers(x_scale, w_scale, y_scale);
  r.zero_point = static_cast<float>(load_f(y_zero_point, 0));
  if (!std::isnan(min) && min != -INFINITY) r.low = static_cast<float>(min) / ys + r.zero_point;
  if (!std::isnan(max) && max != INFINITY) r.high = static_cast<float>(max) / ys + r.zero_point;
  return r;
}

Requantization requantization(const TensorRef& x_scale, const TensorRef& w_scale, const TensorRef& y_scale,
                              const TensorRef& y_zero_point, double min, double max) {
  Requantization r;
  const float ys = static_cast<float>(load_f(y_scale, 0));
  r.multiplier = multipliers(x_scale, w_scale, y_scale);
  r.zero_point = load_i(y_zero_point, 0);
  const IntRange range = int_range(y_zero_point.dtype);
  // The clip's bounds quantized as quantize_linear would (monotone, so clamping after
  // quantizing is clipping before), within the dtype's range.
  const auto quantized = [&](double v) {
    const double q = std::nearbyint(static_cast<double>(static_cast<float>(v) / ys)) + static_cast<double>(r.zero_point);
    return std::clamp(e_result<int64_t>(q), range.min, range.max);
  };
  r.low = std::isnan(min) || min == -INFINITY ? range.min : quantized(min);
  r.high = std::isnan(max) || max == INFINITY ? range.max : quantized(max);
  return r;
}

void quantized_conv2d(const KernelCall& c) {
  const TensorRef &x = *c.in[0], &w = *c.in[3], &w_zero_point = *c.in[5], &y = *c.out[0];
  const TensorRef* bias = c.in[8];
  const ir::QuantizedConv2dAttrs attrs = c.attrs<ir::QuantizedConv2dAttrs>();
  const bool real = ir::dtype_is_float(y.dtype);
  const Requantization requantize = real ? Requantization{} : requantization(*c.in[1], *c.in[4], *c.in[6], *c.in[7], attrs.min, attrs.max);
  const RealResult scaled = real ? real_result(*c.in[1], *c.in[4], *c.in[6], *c.in[7], attrs.min, attrs.max) : RealResult{};
  const ir::Span<int64_t> st = attrs.strides, pads = attrs.pads, dil = attrs.dilations;
  const int64_t x_zero_point = load_i(*c.in[2], 0);
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t O = w.shape[0], CG = w.shape[1], KH = w.shape[2], KW = w.shape[3];
  const int64_t OH = y.shape[2], OW = y.shape[3], OG = O / attrs.groups;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      const int64_t g = o / OG, w_zero = load_i(w_zero_point, w_zero_point.size() == 1 ? 0 : o);
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          // Summed modulo 2^64 (no overflow is undefined) and wrapped into int32, where ONNX
          // sums, as an int32 sum would wrap.
          uint64_t sum = bias ? static_cast<uint64_t>(load_i(*bias, o)) : 0;
          for (int64_t ci = 0; ci < CG; ++ci)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * st[0] - pads[0] + kh * dil[0], iw = ow * st[1] - pads[1] + kw * dil[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const int64_t xv = load_i(x, ((n * C + g * CG + ci) * H + ih) * W + iw) - x_zero_point;
                sum += static_cast<uint64_t>(xv * (load_i(w, ((o * CG + ci) * KH + kh) * KW + kw) - w_zero));
              }
          const int32_t wrapped = static_cast<int32_t>(static_cast<uint32_t>(sum));
          const int64_t at = ((n * O + o) * OH + oh) * OW + ow;
          if (real) store_f(y, at, scaled.apply(wrapped, o));
          else store_i(y, at, requantize.apply(wrapped, o));
        }
    }
}

void matmul_integer(const KernelCall& c) {
  const TensorRef &a = *c.in[0], &b = *c.in[1], &a_zero_point = *c.in[2], &b_zero_point = *c.in[3], &y = *c.out[0];
  const size_t ra = a.shape.rank(), rb = b.shape.rank(), ry = y.shape.rank();
  const int64_t m = y.shape[ry - 2], n = y.shape[ry - 1], k = a.shape[ra - 1];
  // Each operand once as 32-bit integers less their zero points (at most 9 bits), then sums
  // in uint32: modulo 2^32, which is int32's wrap-around, with no overflow undefined.
  const auto shifted = [](const TensorRef& t, const TensorRef& zero_point, int64_t inner, bool per_row) {
    std::vector<uint32_t> v(static_cast<size_t>(t.size()));
    for (int64_t i = 0; i < t.size(); ++i) {
      const int64_t z = load_i(zero_point, zero_point.size() == 1 ? 0 : per_row ? i / inner % zero_point.size() : i % inner);
      v[static_cast<size_t>(i)] = static_cast<uint32_t>(load_i(t, i) - z);
    }
    return v;
  };
  const std::vector<uint32_t> av = shifted(a, a_zero_point, k, true), bv = shifted(b, b_zero_point, n, false);
  const ir::Shape batch = ir::Shape::from(y.shape.begin(), ry - 2);
  BroadcastWalk walk(batch, {ir::Shape::from(a.shape.begin(), ra - 2), ir::Shape::from(b.shape.begin(), rb - 2)});
  std::vector<uint32_t> row(static_cast<size_t>(n));
  for (int64_t bt = 0; bt < batch.num_elements(); ++bt, walk.next()) {
    const uint32_t *pa = av.data() + walk.offset(0) * m * k, *pb = bv.data() + walk.offset(1) * k * n;
    for (int64_t i = 0; i < m; ++i) {
      std::fill(row.begin(), row.end(), 0u);
      for (int64_t p = 0; p < k; ++p)
        for (int64_t j = 0; j < n; ++j) row[static_cast<size_t>(j)] += pa[i * k + p] * pb[p * n + j];
      for (int64_t j = 0; j < n; ++j) store_i(y, (bt * m + i) * n + j, static_cast<int32_t>(row[static_cast<size_t>(j)]));
    }
  }
}

void matmul_nbits(const KernelCall& c) {
  const TensorRef &a = *c.in[0], &b = *c.in[1], &scales = *c.in[2], &y = *c.out[0];
  const TensorRef* zero_points = c.in[3];
  const ir::MatmulNbitsAttrs attrs = c.attrs<ir::MatmulNbitsAttrs>();
  const int64_t k = a.shape[a.shape.rank() - 1], n = y.shape[y.shape.rank() - 1], rows = n ? y.size() / n : 0;
  const int64_t blocks = b.shape[1], block_bytes = b.shape[2];
  // Each column of weights once, as dequantize_linear gives it (an exact integer difference times
  // the block's scale, rounded once to f32), then its dot product with every row.
  std::vector<float> w(static_cast<size_t>(k));
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t p = 0; p < k; ++p) {
      const int64_t block = j * blocks + p / attrs.block_size;
      const int64_t zero = zero_points ? load_i(*zero_points, block) : int64_t{1} << (attrs.bits - 1);
      const int32_t code = nbits_code(b.data<uint8_t>() + j * blocks * block_bytes, p, attrs.bits, block_bytes, attrs.block_size);
      w[static_cast<size_t>(p)] = static_cast<float>(code - zero) * static_cast<float>(load_f(scales, block));
    }
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += load_f(a, r * k + p) * static_cast<double>(w[static_cast<size_t>(p)]);
      store_f(y, r * n + j, sum);
    }
  }
}

}  // namespace esg::eval
