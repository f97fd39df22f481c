// The reference evaluator: runs a graph on the host, op by op, with numpy's semantics. It is
// the numeric oracle of the tests (every YAML example's values, graph files of old releases)
// and is meant to become constant folding; the compiled CPU backend replaces it for speed.
#pragma once
#include <memory>
#include <vector>

#include "eval/host_tensor.hpp"
#include "eval/run_control.hpp"
#include "ir/graph.hpp"

namespace esg::eval {

// The graph rebuilt through the builder with concrete input shapes: every rule runs again, so
// symbolic dimensions become sizes (and inputs that fit no rule fail here, as when building).
std::unique_ptr<ir::Graph> specialize(const ir::Graph& g, const std::vector<ir::Shape>& input_shapes);

// Runs one node's kernel (not constants or control flow) on tensors the caller provides.
void run_kernel(const ir::Graph& g, const ir::Node& n, const std::vector<const TensorRef*>& in,
                const std::vector<const TensorRef*>& out);

// Runs a control-flow node (if, while) of a specialized graph: `inputs` are all its operands,
// captures included; results are copied into `out`, whose shapes must match. Loops stop as
// `control` says (ir::Error Limit or Cancelled).
void run_control_flow(const ir::Graph& g, ir::NodeId id, const std::vector<const TensorRef*>& inputs,
                      const std::vector<const TensorRef*>& out, const RunControl& control);

// The graph's outputs for these inputs (in the graph's input order). Throws ir::Error on a wrong
// input count, dtype or rank, or when an op cannot run (an index out of range). Loops run
// uncapped unless `control` caps them.
std::vector<HostTensor> evaluate(const ir::Graph& g, const std::vector<HostTensor>& inputs, const RunControl& control = {});

}  // namespace esg::eval
