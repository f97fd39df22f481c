// Building graphs node by node in the core suites (passes, Ascend generation): one call per op,
// attributes left at their defaults unless given.
#pragma once
#include <vector>

#include "ir/builder.hpp"

namespace esg::test {

inline ir::ValueId node(ir::Builder& b, const ir::OpSchema& op, std::vector<ir::ValueId> in, std::vector<ir::AttrArg> attrs = {}) {
  attrs.resize(op.attrs.size());
  return b.graph().nodes[b.add_op(op, in, attrs)].first_output;
}

inline ir::ValueId scalar(ir::Builder& b, float v) { return b.add_constant(ir::DType::F32, ir::Shape{}, &v, 4); }

}  // namespace esg::test
