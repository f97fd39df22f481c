// f32 reduce_sum, reduce_mean, reduce_max and reduce_min over trailing axes (the layout of a
// decomposed layer norm, of most pooling-by-reduction, and of a dynamic quantization's range:
// every axis): each output element is one contiguous row of the input, summed in double as the
// reference kernel does, the rows split over the model's threads.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cpu/fast_kernels.hpp"
#include "cpu/row_math.hpp"
#include "cpu/split.hpp"
#include "cpu/vector_math.hpp"
#include "ir/error.hpp"

namespace esg::cpu {
namespace {

ESG_CPU_CLONES double row_sum(const float* x, int64_t n) {
  return lane_sum(n, [&](int64_t j) { return static_cast<double>(x[j]); });
}

// A row's largest or smallest element, or NaN if it holds one (the reference's), in one pass:
// 8 running extremes and 8 NaN flags, so that the loop vectorizes.
template <bool kMax>
ESG_VM_INLINE float extreme_or_nan(const float* z, int64_t n) {
  constexpr int kLanes = 8;
  constexpr float kStart = kMax ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  float lanes[kLanes];
  int nan[kLanes] = {};
  std::fill_n(lanes, kLanes, kStart);
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const float v = z[j + l];
      lanes[l] = (kMax ? lanes[l] < v : v < lanes[l]) ? v : lanes[l];
      nan[l] |= v != v;
    }
  float m = kStart;
  bool any = false;
  for (; j < n; ++j) {
    m = kMax ? std::max(m, z[j]) : std::min(m, z[j]);
    any |= z[j] != z[j];
  }
  for (int l = 0; l < kLanes; ++l) {
    m = kMax ? std::max(m, lanes[l]) : std::min(m, lanes[l]);
    any |= nan[l] != 0;
  }
  return any ? std::numeric_limits<float>::quiet_NaN() : m;
}
ESG_CPU_CLONES float largest(const float* x, int64_t n) { return extreme_or_nan<true>(x, n); }
ESG_CPU_CLONES float smallest(const float* x, int64_t n) { return extreme_or_nan<false>(x, n); }

// y[row] = value(the row's n elements, n) for each of y's rows, the rows split over the threads.
template <class Value>
void each_row(const eval::TensorRef& x, const eval::TensorRef& y, int64_t n, const eval::Parallel* parallel, Value value) {
  split_work(y.size(), n, parallel, [&](int64_t first, int64_t last) {
    for (int64_t row = first; row < last; ++row) y.data<float>()[row] = value(x.data<float>() + row * n, n);
  });
}

template <bool kMax>
void extreme_rows(const eval::KernelCall& c) {
  const eval::TensorRef& x = *c.in[0];
  const eval::TensorRef& y = *c.out[0];
  const int64_t rows = y.size();
  if (rows == 0) return;
  const int64_t n = x.size() / rows;
  if (n == 0) throw ir::Error(ir::ErrorCode::Shape, "max/min of an empty axis");
  const auto extreme = [](const float* from, int64_t count) { return kMax ? largest(from, count) : smallest(from, count); };
  // One long row (a tensor's range, for its dynamic quantization) in pieces over the threads:
  // the extreme of extremes is the row's, whatever the order.
  if (rows == 1 && c.parallel) {
    float parts[64];
    const int64_t pieces = std::clamp<int64_t>(n / kMinElementsPerThread, 1, std::min<int64_t>(c.parallel->threads(), 64));
    if (pieces > 1) {
      c.parallel->run(pieces, [&](int64_t p) { parts[p] = extreme(x.data<float>() + n * p / pieces, n * (p + 1) / pieces - n * p / pieces); });
      y.data<float>()[0] = extreme(parts, pieces);
      return;
    }
  }
  each_row(x, y, n, c.parallel, extreme);
}

template <bool kMean>
void reduce_rows(const eval::KernelCall& c) {
  const eval::TensorRef& x = *c.in[0];
  const eval::TensorRef& y = *c.out[0];
  const int64_t rows = y.size();
  if (rows == 0) return;
  each_row(x, y, x.size() / rows, c.parallel, [](const float* from, int64_t n) {
    const double sum = n ? row_sum(from, n) : 0.0;
    return static_cast<float>(kMean ? sum / static_cast<double>(n) : sum);
  });
}

}  // namespace

eval::Kernel reduce_kernel(const ir::Graph& g, const ir::Node& n) {
  if (g.values[n.first_output].dtype != ir::DType::F32) return nullptr;
  eval::Kernel rows = nullptr;
  switch (n.op->kind) {
    case ir::OpKind::reduce_sum: rows = reduce_rows<false>; break;
    case ir::OpKind::reduce_mean: rows = reduce_rows<true>; break;
    case ir::OpKind::reduce_max: rows = extreme_rows<true>; break;
    case ir::OpKind::reduce_min: rows = extreme_rows<false>; break;
    default: return nullptr;
  }
  const size_t rank = g.shape(g.operands[n.first_input]).rank();
  std::vector<size_t> axes = ir::ReduceSumAttrs(g, n).axes;  // every reduction's view
  if (rank == 0 || axes.empty()) return rows;  // every axis
  std::sort(axes.begin(), axes.end());
  for (size_t i = 0; i < axes.size(); ++i)  // exactly the last axes.size() axes
    if (axes[i] != rank - axes.size() + i) return nullptr;
  return rows;
}

}  // namespace esg::cpu
