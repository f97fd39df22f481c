// A matmul_integer launch on the integer GEMM (integer_gemm.hpp): a's rows (its leading axes
// taken as more rows) times a constant 2-D b, whose zero points are constants too; a's zero
// point (one, or one per row) is read at each run, as DynamicQuantizeLinear computes it there.
// b is packed once, when the plan is lowered, less its zero points.
#pragma once
#include <memory>
#include <string>

#include "cpu/integer_gemm.hpp"
#include "cpu/packed_weights.hpp"
#include "eval/kernels.hpp"
#include "ir/graph.hpp"

namespace esg::cpu {

class IntegerMatmul {
 public:
  // For matmul_integer node `n`; nullptr, with the reason in `why_not`, where the kernel does
  // not take it (the reference kernel runs it then).
  static std::unique_ptr<const IntegerMatmul> make(const ir::Graph& g, const ir::Node& n, integer_gemm::Kernel kernel, const PackWeights& pack,
                                                   std::string& why_not);

  // y = (a - a_zero_point) · b, in pieces over `parallel` (none: on the calling thread).
  void run(const eval::TensorRef& a, const eval::TensorRef& a_zero_point, const eval::TensorRef& y,
           const eval::Parallel* parallel) const;

  integer_gemm::Kernel kernel() const { return kernel_; }

 private:
  IntegerMatmul() = default;
  integer_gemm::Kernel kernel_ = integer_gemm::Kernel::Pairs;
  int64_t k_ = 0, n_ = 0;
  ir::Blob weights_;
};

}  // namespace esg::cpu
