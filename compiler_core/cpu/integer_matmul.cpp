#include "cpu/integer_matmul.hpp"

#include <algorithm>
#include <vector>

#include "cpu/integer_gemm.hpp"
#include "cpu/split.hpp"

namespace esg::cpu {
namespace {

// The constant bytes of value `v`, or null when it is not a constant.
const uint8_t* constant(const ir::Graph& g, ir::ValueId v) {
  const ir::NodeId producer = g.values[v].producer;
  return producer != ir::kNone && g.nodes[producer].blob != ir::kNone ? g.blobs[g.nodes[producer].blob]->data() : nullptr;
}

int32_t integer(const uint8_t* bytes, ir::DType dtype, int64_t i) {
  return dtype == ir::DType::I8 ? static_cast<int8_t>(bytes[i]) : bytes[i];
}

}  // namespace

std::unique_ptr<const IntegerMatmul> IntegerMatmul::make(const ir::Graph& g, const ir::Node& n, integer_gemm::Kernel kernel,
                                                         const PackWeights& pack, std::string& why_not) {
  const auto in = g.inputs(n);
  const ir::Shape a = g.shape(in[0]), b = g.shape(in[1]);
  const uint8_t *weights = constant(g, in[1]), *zero_points = constant(g, in[3]);
  if (!integer_gemm::available(kernel)) why_not = kernel == integer_gemm::Kernel::Vnni ? "the CPU lacks AVX512-VNNI" : "the CPU lacks AVX2";
  else if (a[a.rank() - 1] == 0 || g.shape(n.first_output).num_elements() == 0) why_not = "an empty product";
  else if (!weights || b.rank() != 2) why_not = "b is not a constant matrix";
  else if (!zero_points) why_not = "b's zero point is not a constant";
  if (!why_not.empty()) return nullptr;
  std::unique_ptr<IntegerMatmul> m(new IntegerMatmul());
  m->kernel_ = kernel;
  m->k_ = b[0];
  m->n_ = b[1];
  const ir::DType b_type = g.values[in[1]].dtype;
  std::vector<int32_t> zeros;
  for (int64_t j = 0; j < g.shape(in[3]).num_elements(); ++j) zeros.push_back(integer(zero_points, b_type, j));
  const integer_gemm::Operand matrix{weights, b_type == ir::DType::I8, m->n_, zeros.data(), false, zeros.size() > 1};
  // The zero points change the bytes: they are part of what is shared.
  std::string layout = std::string(kernel == integer_gemm::Kernel::Vnni ? "integer_gemm vpdpbusd " : "integer_gemm vpmaddwd ") + std::to_string(m->k_) + "x" + std::to_string(m->n_) + " less";
  for (const int32_t z : zeros) layout += " " + std::to_string(z);
  m->weights_ = pack(0, integer_gemm::packed_bytes(kernel, m->k_, m->n_), PackedFrom{weights, layout},
                     [&](uint8_t* into) { integer_gemm::pack(kernel, matrix, m->k_, m->n_, into); });
  return m;
}

void IntegerMatmul::run(const eval::TensorRef& a, const eval::TensorRef& a_zero_point, const eval::TensorRef& y,
                        const eval::Parallel* parallel) const {
  const int64_t rows = a.size() / k_, m = a.shape[a.shape.rank() - 2];
  // One zero point, or one for each of a's rows (M of them, again for each matrix of a batch).
  thread_local std::vector<int32_t> zero_points;
  const bool per_row = a_zero_point.size() != 1;
  zero_points.resize(static_cast<size_t>(per_row ? rows : 1));
  for (size_t r = 0; r < zero_points.size(); ++r)
    zero_points[r] = integer(a_zero_point.data<uint8_t>(), a_zero_point.dtype, per_row ? static_cast<int64_t>(r) % m : 0);
  const integer_gemm::Operand rows_of_a{a.data<uint8_t>(), a.dtype == ir::DType::I8, k_, zero_points.data(), per_row, false};
  const int64_t panels = (n_ + integer_gemm::kColumns - 1) / integer_gemm::kColumns;
  const int pieces = pieces_for_macs(static_cast<double>(rows) * static_cast<double>(k_) * static_cast<double>(n_),
                                     parallel ? parallel->threads() : 1, kMinProductMacsPerPiece);
  // Columns in shares of whole panels, each thread reading a share of the weights; rows when
  // the panels are too few to go round.
  const bool by_columns = panels >= pieces;
  auto piece = [&](int64_t p) {
    if (by_columns) {
      const int64_t first = panels * p / pieces * integer_gemm::kColumns, last = std::min(n_, panels * (p + 1) / pieces * integer_gemm::kColumns);
      return integer_gemm::multiply(kernel_, rows_of_a, rows, weights_->data(), k_, n_, first, last, y.data<int32_t>(), n_);
    }
    const int64_t first = rows * p / pieces, last = rows * (p + 1) / pieces;
    integer_gemm::Operand share = rows_of_a;
    share.data += first * k_;
    if (share.per_row) share.zero_points += first;
    integer_gemm::multiply(kernel_, share, last - first, weights_->data(), k_, n_, 0, n_, y.data<int32_t>() + first * n_, n_);
  };
  if (pieces == 1 || !parallel)
    for (int64_t p = 0; p < pieces; ++p) piece(p);
  else
    parallel->run(pieces, piece);
}

}  // namespace esg::cpu
