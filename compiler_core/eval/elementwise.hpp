// Elementwise ops in the evaluator: the generated scalar functions (from the YAML) and the
// one broadcasting loop that applies them.
#pragma once
#include <vector>

#include "eval/host_tensor.hpp"
#include "ir/op_schema.hpp"

namespace esg::eval {

// Attributes of an elementwise op, passed to its math as doubles from a fixed array on the stack
// (the generated table asserts every op fits).
constexpr size_t kMaxElementwiseAttrs = 4;

struct ElementwiseFn {
  const ir::OpSchema* op;
  double (*f)(const double* in, const double* attr);
  int64_t (*i)(const int64_t* in, const double* attr);
  uint64_t (*u)(const uint64_t* in, const double* attr);  // u64 math: its upper half compares and divides unsigned
  // out[e] = f(rows[0][e], rows[1][e], …) for e < n; `out` overlaps no row.
  void (*row_f)(const double* const* rows, const double* attr, double* out, int64_t n);
};

// The scalar functions of `op`, or nullptr if it is not elementwise.
const ElementwiseFn* find_elementwise(const ir::OpSchema& op);

// out = fn(inputs…) with numpy broadcasting; `out` already has its shape and dtype. Computes in
// double when any input or the output is a float dtype, else in uint64 when an input is u64,
// else in int64 (exact for every other integer dtype).
void run_elementwise(const ElementwiseFn& fn, const std::vector<const TensorRef*>& inputs, const double* attrs,
                     const TensorRef& out);

}  // namespace esg::eval
