// What the elementwise members of a convolution-headed group do, restated as oneDNN post-ops:
// the convolution primitive then applies them to each output block while it is in registers,
// and the group is one launch with no pass of its own over memory. oneDNN computes them with its
// own approximations of sigmoid, tanh, erf and the like, and x / s as x · (1/s): such a group
// matches its unfused ops to within rounding (a few ulps), not bit for bit as the f32 rows do.
#pragma once
#include <optional>
#include <vector>

#include "ir/graph.hpp"
#include "runtime/grouping.hpp"

namespace esg::cpu {

struct PostOp {
  enum class Kind : uint8_t { Eltwise, Sum } kind = Kind::Eltwise;
  int algorithm = 0;        // Eltwise: oneDNN's dnnl_alg_kind_t
  float alpha = 0, beta = 0;  // Eltwise: its parameters; Sum: alpha scales the residual
};

struct Epilogue {
  std::vector<PostOp> post_ops;
  ir::ValueId residual = ir::kNone;  // the value a Sum adds: the group's output starts as a copy of it
};

// The post-ops computing a convolution-headed group's members after the convolution, or
// nullopt when some member has none. The members must form a chain, each reading the one
// before, whose last result is the group's one output; besides, a member reads nothing, a
// constant single f32 (mul, add, sub, div: a linear post-op) or, once, a value of the result's
// shape (x + r or x - r: a sum).
std::optional<Epilogue> conv_epilogue(const ir::Graph& g, const runtime::FusedGroup& group);

}  // namespace esg::cpu
