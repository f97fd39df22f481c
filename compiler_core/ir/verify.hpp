// The graph's structural invariants, checked independently of how the graph was made.
#pragma once
#include "ir/graph.hpp"

namespace esg::ir {

// Throws ir::Error (ErrorCode::Internal for a graph the builder should never have produced)
// naming the first violation.
void verify(const Graph& g);

}  // namespace esg::ir
