// f32 softmax, log-softmax, layer norm and RMS norm over the last axis, the common case: plain
// loops over contiguous rows, the rows split over the model's threads. Sums accumulate in double
// as the reference kernels do; per-element work (softmax's exp, the normalizing loop) is f32, so
// results agree with the reference to a few f32 ulps.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cpu/fast_kernels.hpp"
#include "cpu/row_math.hpp"
#include "cpu/split.hpp"
#include "cpu/vector_math.hpp"

namespace esg::cpu {
namespace {

bool last_axis(int64_t axis, size_t rank) { return axis == -1 || axis == static_cast<int64_t>(rank) - 1; }

// One softmax row: e = exp(z - max z) with z = scale·x, once per element in f32 (the argument is
// <= 0 and the result is rounded to f32 anyway), the sum in double, then one multiply per
// element. Built per ISA level like the generated rows, so every loop here vectorizes.
ESG_CPU_CLONES void softmax_row(const float* __restrict src, float scale, float* __restrict dst, float* __restrict e, int64_t n) {
  for (int64_t j = 0; j < n; ++j) e[j] = scale * src[j];
  const float m = row_max(e, n);
  for (int64_t j = 0; j < n; ++j) e[j] = vm::exp(e[j] - m);
  const float inv = static_cast<float>(1.0 / lane_sum(n, [&](int64_t j) { return static_cast<double>(e[j]); }));
  for (int64_t j = 0; j < n; ++j) dst[j] = e[j] * inv;
}

// Rows split over threads. log_softmax keeps the reference's double math.
template <bool kLog>
void softmax_rows(const eval::KernelCall& c) {
  const eval::TensorRef& x = *c.in[0];
  const eval::TensorRef& y = *c.out[0];
  const int64_t n = x.shape[x.shape.rank() - 1];
  if (n == 0) return;
  const bool scaled = c.node.op->attr_index("scale") >= 0;
  const double scale = scaled ? c.attr_float("scale") : 1.0;
  split_work(x.size() / n, n, c.parallel, [&](int64_t first, int64_t last) {
    std::vector<float> z(static_cast<size_t>(n));
    for (int64_t row = first; row < last; ++row) {
      const float* src = x.data<float>() + row * n;
      float* dst = y.data<float>() + row * n;
      if (!kLog) {
        softmax_row(src, static_cast<float>(scale), dst, z.data(), n);
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

// dst = (src - mean) * inv_std [* scale] [+ bias] in f32: one branch-free loop per combination
// so the compiler vectorizes it (the statistics above stay in double).
template <bool kScale, bool kBias>
void normalize_row(const float* src, float* dst, int64_t n, float mean, float inv_std, const float* scale,
                   const float* bias) {
  for (int64_t j = 0; j < n; ++j) {
    float v = (src[j] - mean) * inv_std;
    if constexpr (kScale) v *= scale[j];
    if constexpr (kBias) v += bias[j];
    dst[j] = v;
  }
}

// One layer-norm (or RMS-norm) row: statistics in double over partial sums, the normalizing
// loop in f32. Built per ISA level like the generated rows.
ESG_CPU_CLONES void norm_row(const float* src, float* dst, int64_t n, bool rms, double eps, const float* scale,
                             const float* bias) {
  const double mean = rms ? 0.0 : lane_sum(n, [&](int64_t j) { return static_cast<double>(src[j]); }) / static_cast<double>(n);
  const double var = lane_sum(n, [&](int64_t j) { return (src[j] - mean) * (src[j] - mean); });
  const double inv = 1.0 / std::sqrt(var / static_cast<double>(n) + eps);
  const float m = static_cast<float>(mean), k = static_cast<float>(inv);
  if (scale && bias) normalize_row<true, true>(src, dst, n, m, k, scale, bias);
  else if (scale) normalize_row<true, false>(src, dst, n, m, k, scale, bias);
  else if (bias) normalize_row<false, true>(src, dst, n, m, k, scale, bias);
  else normalize_row<false, false>(src, dst, n, m, k, scale, bias);
}

template <bool kRms>
void norm_rows(const eval::KernelCall& c) {
  const eval::TensorRef& x = *c.in[0];
  const eval::TensorRef& y = *c.out[0];
  const int64_t n = x.shape[x.shape.rank() - 1];
  if (n == 0) return;
  const float* scale = c.in.size() > 1 && c.in[1] ? c.in[1]->data<float>() : nullptr;
  const float* bias = c.in.size() > 2 && c.in[2] ? c.in[2]->data<float>() : nullptr;
  const double eps = c.attr_float("epsilon");
  split_work(x.size() / n, n, c.parallel, [&](int64_t first, int64_t last) {
    for (int64_t row = first; row < last; ++row) norm_row(x.data<float>() + row * n, y.data<float>() + row * n, n, kRms, eps, scale, bias);
  });
}

}  // namespace

eval::Kernel normalize_kernel(const ir::Graph& g, const ir::Node& n) {
  const std::string op = n.op->name;
  const bool is_softmax = op == "softmax" || op == "log_softmax", is_norm = op == "layer_norm" || op == "rms_norm";
  if ((!is_softmax && !is_norm) || g.values[n.first_output].dtype != ir::DType::F32) return nullptr;
  const size_t rank = g.shape(n.first_output).rank();
  const int64_t axis = g.attrs[n.first_attr + static_cast<size_t>(n.op->attr_index("axis"))].i;
  if (rank == 0 || !last_axis(axis, rank)) return nullptr;
  if (op == "softmax") {
    const bool masked = n.num_inputs - n.num_captures > 1 && g.operands[n.first_input + 1] != ir::kNone;
    return masked ? nullptr : softmax_rows<false>;
  }
  if (op == "log_softmax") return softmax_rows<true>;
  return op == "layer_norm" ? norm_rows<false> : norm_rows<true>;
}

}  // namespace esg::cpu
