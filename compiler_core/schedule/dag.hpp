// The compiler's view of a graph for scheduling and memory planning: ops over values with
// byte sizes, nothing else. Built from an ir::Graph with concrete shapes (from_graph), or
// directly by tests (random DAGs).
#pragma once
#include <cstdint>
#include <vector>

#include "ir/graph.hpp"

namespace esg::schedule {

struct Dag {
  struct Op {
    std::vector<int> inputs;    // value ids
    std::vector<int> outputs;   // value ids; each value has exactly one producer or none
    std::vector<int> reusable;  // inputs an output may overwrite in place: read element by element, or a view's bytes
                                // at the same index the output is written (same shape and width)
    int alias = -1;  // a view (reshape, squeeze, unsqueeze): the input whose bytes its one output is
  };
  std::vector<int64_t> value_bytes;
  std::vector<Op> ops;
  std::vector<int> graph_inputs;   // live before the first op (the caller's buffers)
  std::vector<int> graph_outputs;  // live after the last op (the caller's buffers)

  int num_values() const { return static_cast<int>(value_bytes.size()); }
  int num_ops() const { return static_cast<int>(ops.size()); }
  std::vector<int> producers() const;  // op of each value, -1 for graph inputs
};

// Region 0 of a graph whose shapes are all concrete (eval::specialize gives one). Constants
// are not ops: their values count as inputs (they live in the graph, not in the arena).
// `fused` lists groups of nodes that run as one op: it reads what they read from outside and
// writes what is used outside; their values inside take no memory.
struct GraphDag {
  Dag dag;
  std::vector<ir::NodeId> nodes;  // the node of each op (a group's last member)
  std::vector<int> group;         // the index in `fused` an op runs, or -1
  std::vector<int> value;         // the DAG value of each graph value, or -1
};
// `lone_in_place`: whether an elementwise op outside every group may write over a dying input.
// The CPU's kernels read each index before writing it; a device backend's operator library,
// which runs the ops its kernels leave out, promises no such thing (and a cast between types of
// one width would write one type over the other).
// `sizes`: a copy of `g` with other shapes (the largest sizes of a graph with symbolic ones),
// which the values' bytes come from; `g`'s own shapes decide what is in place, so a decision
// holds for every size its symbols take.
GraphDag from_graph(const ir::Graph& g, const std::vector<std::vector<ir::NodeId>>& fused = {}, bool lone_in_place = true,
                    const ir::Graph* sizes = nullptr);

}  // namespace esg::schedule
