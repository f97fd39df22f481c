// Matrix products through oneDNN (chosen over OpenBLAS, BLIS and XNNPACK on our shapes:
// bench/RESULTS.md). oneDNN picks its kernels for the CPU at run time. Each call runs on one
// OpenMP thread; a large product is split into blocks of rows (or, for a few rows, of columns)
// over the model's pool, one per kMinGemmMacsPerThread multiply-adds and at most its free
// threads (one inside a stream, whose siblings use the cores, or beside a concurrent run): the
// pool's callers take the blocks no worker has started, so a descheduled worker never holds a
// run up as an OpenMP team member does (cpu/conv_primitive.hpp splits convolutions alike).
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "cpu/fast_kernels.hpp"
#include "cpu/gemm.hpp"
#include "cpu/omp_threads.hpp"
#include "eval/indexing.hpp"
#include "ir/error.hpp"

namespace esg::cpu {
namespace {

// matmul with numpy batch broadcasting: one sgemm per batch, at the broadcast offsets. Batches
// of small products (attention's per-head GEMMs) spread over the model's pool, a product each;
// a product large enough to keep every thread busy splits itself.
void matmul_f32(const eval::KernelCall& c) {
  const eval::TensorRef& a = *c.in[0];
  const eval::TensorRef& b = *c.in[1];
  const eval::TensorRef& y = *c.out[0];
  const ir::MatmulAttrs attrs = c.attrs<ir::MatmulAttrs>();
  const bool ta = attrs.transpose_a, tb = attrs.transpose_b;
  const size_t ra = a.shape.rank(), rb = b.shape.rank(), ry = y.shape.rank();
  const int64_t m = y.shape[ry - 2], n = y.shape[ry - 1], k = a.shape[ra - (ta ? 2 : 1)];
  const ir::Shape batch = ir::Shape::from(y.shape.begin(), ry - 2);
  eval::BroadcastWalk walk(batch, {ir::Shape::from(a.shape.begin(), ra - 2), ir::Shape::from(b.shape.begin(), rb - 2)});
  if (y.size() == 0) return;
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* py = y.data<float>();
  const int64_t batches = batch.num_elements();
  const int threads = c.parallel ? c.parallel->free_threads() : 1;
  auto one = [&](int64_t i, int64_t a_at, int64_t b_at, const eval::Parallel* parallel) {
    sgemm(ta, tb, m, n, k, pa + a_at * m * k, ta ? m : k, pb + b_at * k * n, tb ? k : n, py + i * m * n, n, parallel);
  };
  const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const auto pieces = static_cast<int64_t>(std::min<double>({static_cast<double>(threads), static_cast<double>(batches),
                                                             static_cast<double>(batches) * macs / kMinGemmMacsPerThread}));
  // Products that can keep every thread busy split themselves, one after the other.
  if (pieces < 2 || macs >= static_cast<double>(kMinGemmMacsPerThread) * threads) {
    for (int64_t i = 0; i < batches; ++i, walk.next()) one(i, walk.offset(0), walk.offset(1), c.parallel);
    return;
  }
  std::vector<std::pair<int64_t, int64_t>> at(static_cast<size_t>(batches));
  for (auto& ab : at) ab = {walk.offset(0), walk.offset(1)}, walk.next();
  c.parallel->run(pieces, [&](int64_t p) {
    for (int64_t i = batches * p / pieces; i < batches * (p + 1) / pieces; ++i)
      one(i, at[static_cast<size_t>(i)].first, at[static_cast<size_t>(i)].second, nullptr);
  });
}

}  // namespace

void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
           float* c, int64_t ldc, const eval::Parallel* parallel) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: zeros (oneDNN refuses K = 0)
    for (int64_t i = 0; i < m; ++i) std::memset(c + i * ldc, 0, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  // Rows [i0, i1) and columns [j0, j1) of the product, on this thread.
  auto block = [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    const OmpThreads scoped(1);
    const dnnl_status_t s = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', i1 - i0, j1 - j0, k, 1.0f, a + (ta ? i0 : i0 * lda), lda,
                                       b + (tb ? j0 * ldb : j0), ldb, 0.0f, c + i0 * ldc + j0, ldc);
    if (s != dnnl_success) throw ir::Error(ir::ErrorCode::Internal, "oneDNN sgemm failed with status " + std::to_string(s));
  };
  const int pieces = threads_for_macs(static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k),
                                      parallel ? parallel->free_threads() : 1);
  if (pieces < 2) return block(0, m, 0, n);
  // Rows while each block gets a few (a kernel's register block); else columns.
  if (m >= int64_t{8} * pieces)
    parallel->run(pieces, [&](int64_t p) { block(m * p / pieces, m * (p + 1) / pieces, 0, n); });
  else
    parallel->run(pieces, [&](int64_t p) { block(0, m, n * p / pieces, n * (p + 1) / pieces); });
}

void gemm_rows(const eval::TensorRef& a, const eval::TensorRef& b, bool transpose_b, int64_t first, int64_t last,
               float* out, const eval::Parallel* parallel) {
  const int64_t k = a.shape[a.shape.rank() - 1], n = b.shape[transpose_b ? 0 : 1];
  if (last > first) sgemm(false, transpose_b, last - first, n, k, a.data<float>() + first * k, k, b.data<float>(), transpose_b ? k : n, out, n, parallel);
}

eval::Kernel gemm_kernel(const ir::Graph& g, const ir::Node& n) {
  return n.op->kind == ir::OpKind::matmul && g.values[n.first_output].dtype == ir::DType::F32 ? matmul_f32 : nullptr;
}

}  // namespace esg::cpu
