// f32 reduce_sum and reduce_mean over trailing axes (the layout of a decomposed layer norm and
// of most pooling-by-reduction): each output element is one contiguous row of the input, summed
// in double as the reference kernel does, the rows split over the model's threads.
#include <algorithm>
#include <string>
#include <vector>

#include "cpu/fast_kernels.hpp"
#include "cpu/row_math.hpp"
#include "cpu/split.hpp"
#include "cpu/vector_math.hpp"

namespace esg::cpu {
namespace {

ESG_CPU_CLONES double row_sum(const float* x, int64_t n) {
  return lane_sum(n, [&](int64_t j) { return static_cast<double>(x[j]); });
}

template <bool kMean>
void reduce_rows(const eval::KernelCall& c) {
  const eval::TensorRef& x = *c.in[0];
  const eval::TensorRef& y = *c.out[0];
  const int64_t rows = y.size();
  if (rows == 0) return;
  const int64_t n = x.size() / rows;
  split_work(rows, n, c.parallel, [&](int64_t first, int64_t last) {
    for (int64_t row = first; row < last; ++row) {
      const double sum = n ? row_sum(x.data<float>() + row * n, n) : 0.0;
      y.data<float>()[row] = static_cast<float>(kMean ? sum / static_cast<double>(n) : sum);
    }
  });
}

}  // namespace

eval::Kernel reduce_kernel(const ir::Graph& g, const ir::Node& n) {
  const bool mean = n.op->kind == ir::OpKind::reduce_mean;
  if ((!mean && n.op->kind != ir::OpKind::reduce_sum) || g.values[n.first_output].dtype != ir::DType::F32) return nullptr;
  const eval::Kernel rows = mean ? reduce_rows<true> : reduce_rows<false>;
  const size_t rank = g.shape(g.operands[n.first_input]).rank();
  std::vector<size_t> axes = ir::ReduceSumAttrs(g, n).axes;  // every reduction's view
  if (rank == 0 || axes.empty()) return rows;  // every axis
  std::sort(axes.begin(), axes.end());
  for (size_t i = 0; i < axes.size(); ++i)  // exactly the last axes.size() axes
    if (axes[i] != rank - axes.size() + i) return nullptr;
  return rows;
}

}  // namespace esg::cpu
