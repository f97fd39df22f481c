// A graph's shapes inferred again for other input shapes, in place: the same nodes, values and
// attributes, each node's rule run again over its inputs' new shapes. This is how a plan compiled
// with symbolic sizes learns every value's size for a run's sizes: no node is made, so it costs
// a fraction of a rebuild, and it checks the sizes as the builder did (a rule that rejects them
// fails naming the op, its inputs and the rule). Sizes the builder took on trust for symbols
// (two symbols of one matmul axis) are checked here, where they are known.
#pragma once
#include <vector>

#include "ir/graph.hpp"

namespace esg::ir {

// Whether reinfer can run on `g`: no node of region 0 has a body (a body's parameters would
// need their shapes inferred again too).
bool reinferable(const Graph& g);
// The nodes of region 0 with a symbolic operand or result, in order: the ones whose shapes
// change with the inputs' (a node all static keeps its shapes: its rule ran when it was built).
std::vector<NodeId> symbolic_nodes(const Graph& g);
// Sets the inputs' shapes, then runs the rules of `nodes` (symbolic_nodes of `g`, or of a graph
// `g` is a copy of) in order. Throws ir::Error naming the input or the op when a shape is
// rejected; `g` is then partly updated and must be dropped.
void reinfer(Graph& g, const std::vector<Shape>& input_shapes, const std::vector<NodeId>& nodes);

}  // namespace esg::ir
