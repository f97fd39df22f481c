// The evaluator's kernels for non-elementwise ops, looked up by op.
#pragma once
#include <vector>

#include "eval/host_tensor.hpp"
#include "ir/graph.hpp"

namespace esg::eval {

struct KernelCall {
  const ir::Graph& graph;
  const ir::Node& node;
  std::vector<const TensorRef*> in;  // declared inputs; nullptr for an absent optional one
  std::vector<const TensorRef*> out;  // shaped, with their memory, by the caller

  int64_t attr_int(const char* name) const;  // int, bool, enum and dtype attributes
  double attr_float(const char* name) const;
  ir::Span<int64_t> ints(const char* name) const;

 private:
  const ir::AttrValue& attr(const char* name) const;
};

using Kernel = void (*)(const KernelCall&);

// nullptr for elementwise ops (see elementwise.hpp), constants and control flow.
Kernel find_kernel(const ir::OpSchema& op);

}  // namespace esg::eval
