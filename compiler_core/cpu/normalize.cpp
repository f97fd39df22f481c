// f32 softmax, log-softmax, layer norm and RMS norm over the last axis, the common case: plain
// loops over contiguous rows, the rows split over the model's threads. Sums accumulate in f32
// lanes within blocks of 512 elements and in double across them; per-element work is f32, so
// results agree with the reference to a few f32 ulps.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cpu/fast_kernels.hpp"
#include "cpu/row_math.hpp"
#include "cpu/softmax_row.hpp"
#include "cpu/split.hpp"
#include "cpu/vector_math.hpp"

namespace esg::cpu {
namespace {

// exp(scale·z[j] - m) into dst and its sum: f32 partial sums within blocks of 512, blocks added
// in double. z may be dst itself (a masked row's logits).
template <class Z>
ESG_VM_INLINE double exp_sum(Z z, float scale, float m, float* dst, int64_t n) {
  double sum = 0;
  constexpr int64_t kBlock = 512;  // f32 partial sums within a block, blocks added in double
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = std::min(n, start + kBlock);
    float lanes[16] = {};
    int64_t j = start;
    for (; j + 16 <= end; j += 16)
      for (int l = 0; l < 16; ++l) {
        const float e = vm::exp(scale * z(j + l) - m);
        dst[j + l] = e;
        lanes[l] += e;
      }
    double block = 0;
    for (; j < end; ++j) block += dst[j] = vm::exp(scale * z(j) - m);
    for (float l : lanes) block += l;
    sum += block;
  }
  return sum;
}


// Where each row's mask starts: the mask (numpy-broadcast to x) read with a stride per leading
// axis of x (0 where it broadcasts), and along the row one value each or one for all.
struct MaskRows {
  const float* mask = nullptr;
  int64_t rank = 0, dims[ir::kMaxRank] = {}, strides[ir::kMaxRank] = {}, step = 0;

  MaskRows(const eval::TensorRef& x, const eval::TensorRef* m) {
    if (!m) return;
    mask = m->data<float>();
    rank = static_cast<int64_t>(x.shape.rank()) - 1;
    const int64_t mr = static_cast<int64_t>(m->shape.rank()), offset = rank + 1 - mr;
    int64_t stride = 1;
    for (int64_t d = mr - 1; d >= 0; --d) {
      const int64_t xd = d + offset;  // the axis of x this mask axis broadcasts to
      if (xd == rank) step = m->shape[static_cast<size_t>(d)] == 1 ? 0 : 1;
      else strides[xd] = m->shape[static_cast<size_t>(d)] == 1 ? 0 : stride;
      stride *= m->shape[static_cast<size_t>(d)];
    }
    for (int64_t d = 0; d < rank; ++d) dims[d] = x.shape[static_cast<size_t>(d)];
  }
  const float* row(int64_t r) const {
    if (!mask) return nullptr;
    int64_t at = 0;
    for (int64_t d = rank - 1; d >= 0; --d) at += r % dims[d] * strides[d], r /= dims[d];
    return mask + at;
  }
};

// Rows split over threads. log_softmax keeps the reference's double math.
template <bool kLog>
void softmax_rows(const eval::KernelCall& c) {
  const eval::TensorRef& x = *c.in[0];
  const eval::TensorRef& y = *c.out[0];
  const int64_t n = x.shape[x.shape.rank() - 1];
  if (x.size() == 0) return;  // no rows, or rows of nothing (a row's scratch of 2^40 would not fit)
  const double scale = kLog ? 1.0 : c.attrs<ir::SoftmaxAttrs>().scale;  // log_softmax has no scale
  const MaskRows mask(x, !kLog && c.in.size() > 1 ? c.in[1] : nullptr);
  split_work(x.size() / n, n, c.parallel, [&](int64_t first, int64_t last) {
    std::vector<float> z(kLog ? static_cast<size_t>(n) : 0);
    for (int64_t row = first; row < last; ++row) {
      const float* src = x.data<float>() + row * n;
      float* dst = y.data<float>() + row * n;
      if (!kLog) {
        softmax_row(src, static_cast<float>(scale), mask.row(row), mask.step, dst, n);
        continue;
      }
      for (int64_t j = 0; j < n; ++j) z[static_cast<size_t>(j)] = static_cast<float>(scale * src[j]);
      const double m = row_max(z.data(), n);
      const double sum = lane_sum(n, [&](int64_t j) { return std::exp(z[static_cast<size_t>(j)] - m); });
      const double log_sum = std::log(sum);
      for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<float>(z[static_cast<size_t>(j)] - m - log_sum);
    }
  });
}

// dst = ((src - shift) - centered) * inv_std [* scale] [+ bias] in f32, where the mean is
// shift + centered: src - shift is exact for data near the shift (an element of the row), so a
// mean far from zero costs no precision. One branch-free loop per combination, so the compiler
// vectorizes it.
template <bool kScale, bool kBias>
ESG_VM_INLINE void normalize_row(const float* src, float* dst, int64_t n, float shift, float centered, float inv_std, const float* scale,
                   const float* bias) {
  for (int64_t j = 0; j < n; ++j) {
    const float v = ((src[j] - shift) - centered) * inv_std;
    if constexpr (kScale && kBias) dst[j] = vm::fma(v, scale[j], bias[j]);
    else if constexpr (kScale) dst[j] = v * scale[j];
    else if constexpr (kBias) dst[j] = v + bias[j];
    else dst[j] = v;
  }
}

// One layer-norm (or RMS-norm) row: the mean, then the sums of x - mean (its correction) and of
// their squares (the variance, with nothing to cancel), then the normalizing loop; the row is in
// L1 after the first pass. Sums too large for f32 lanes are redone in double. Built per ISA
// level like the generated rows.
ESG_CPU_CLONES void norm_row(const float* src, float* dst, int64_t n, bool rms, double eps, const float* scale,
                             const float* bias) {
  double sum = 0, squares = 0;
  if (!rms) shifted_sums(src, 0.0f, n, &sum, &squares);
  float shift = rms ? 0.0f : static_cast<float>(sum / static_cast<double>(n));
  shifted_sums(src, shift, n, &sum, &squares);
  if (!std::isfinite(squares)) {
    double mean = 0;
    for (int64_t j = 0; !rms && j < n; ++j) mean += src[j];
    shift = static_cast<float>(mean / static_cast<double>(n));
    sum = squares = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double d = double(src[j]) - shift;
      sum += d, squares += d * d;
    }
  }
  if (rms) sum = 0;
  const double count = static_cast<double>(n), centered = sum / count;
  const double var = std::max(0.0, squares / count - centered * centered);
  const double inv = 1.0 / std::sqrt(var + eps);
  const float c = static_cast<float>(centered), k = static_cast<float>(inv);
  if (scale && bias) normalize_row<true, true>(src, dst, n, shift, c, k, scale, bias);
  else if (scale) normalize_row<true, false>(src, dst, n, shift, c, k, scale, bias);
  else if (bias) normalize_row<false, true>(src, dst, n, shift, c, k, scale, bias);
  else normalize_row<false, false>(src, dst, n, shift, c, k, scale, bias);
}

template <bool kRms, class A>
void norm_rows(const eval::KernelCall& c) {
  const eval::TensorRef& x = *c.in[0];
  const eval::TensorRef& y = *c.out[0];
  const int64_t n = x.shape[x.shape.rank() - 1];
  if (n == 0) return;
  const float* scale = c.in.size() > 1 && c.in[1] ? c.in[1]->data<float>() : nullptr;
  const float* bias = c.in.size() > 2 && c.in[2] ? c.in[2]->data<float>() : nullptr;
  const double eps = c.attrs<A>().epsilon;
  split_work(x.size() / n, n, c.parallel, [&](int64_t first, int64_t last) {
    for (int64_t row = first; row < last; ++row) norm_row(x.data<float>() + row * n, y.data<float>() + row * n, n, kRms, eps, scale, bias);
  });
}

}  // namespace

// One softmax row (softmax_row.hpp): the largest scale·x (scale·max x, or scale·min x for a
// negative scale), then e = exp(scale·x - max) into dst once per element in f32 (the argument
// is <= 0 and the result is rounded to f32 anyway), its sum, then one multiply per element;
// only the first two read src, the rest work on dst while it is in L1. With a mask (one value
// per element, `mask_step` 1, or one for the row, 0), the logits scale·x + mask go to dst first
// and the rest reads them there. Built per ISA level like the generated rows, so every loop
// here vectorizes.
ESG_CPU_CLONES void softmax_row(const float* __restrict src, float scale, const float* mask, int64_t mask_step, float* dst, int64_t n) {
  double sum;
  if (mask) {
    for (int64_t j = 0; j < n; ++j) dst[j] = scale * src[j] + mask[j * mask_step];
    sum = exp_sum([dst](int64_t j) { return dst[j]; }, 1.0f, row_max(dst, n), dst, n);
  } else {
    const float m = scale >= 0 ? scale * row_max(src, n) : scale * row_min(src, n);
    sum = exp_sum([src](int64_t j) { return src[j]; }, scale, m, dst, n);
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) dst[j] *= inv;
}

eval::Kernel normalize_kernel(const ir::Graph& g, const ir::Node& n) {
  using K = ir::OpKind;
  if (g.values[n.first_output].dtype != ir::DType::F32) return nullptr;
  const size_t rank = g.shape(n.first_output).rank();
  // Rows along the last axis only (a norm's axis is its first normalized one).
  const auto along_last = [&](size_t axis) { return rank > 0 && axis == rank - 1; };
  switch (n.op->kind) {
    case K::softmax: {
      const bool masked = n.num_inputs - n.num_captures > 1 && g.operands[n.first_input + 1] != ir::kNone;
      return along_last(ir::SoftmaxAttrs(g, n).axis) && (!masked || g.values[g.operands[n.first_input + 1]].dtype == ir::DType::F32)
                 ? softmax_rows<false>
                 : nullptr;
    }
    case K::log_softmax: return along_last(ir::LogSoftmaxAttrs(g, n).axis) ? softmax_rows<true> : nullptr;
    case K::layer_norm: return along_last(ir::LayerNormAttrs(g, n).axis) ? norm_rows<false, ir::LayerNormAttrs> : nullptr;
    case K::rms_norm: return along_last(ir::RmsNormAttrs(g, n).axis) ? norm_rows<true, ir::RmsNormAttrs> : nullptr;
    default: return nullptr;
  }
}

}  // namespace esg::cpu
