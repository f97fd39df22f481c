// A graph cut before the ops whose output sizes only running them tells (OpSchema::sized_by_data:
// nonzero, unique, non_max_suppression, and the ops with a static form, whose attributes come as
// tensors: reshape_to, slice_to, ...). Stage k holds the ops that need the outputs of k such
// ops one after another and no more; those ops run between stages, on the host, and the next
// stage takes their outputs as inputs whose sizes are symbols. Each stage is then an ordinary
// graph: compiled (a symbolic plan per size class, as for any symbolic input) or evaluated.
// This is how ONNX Runtime and PyTorch meet such ops too: the host waits for the sizes.
#pragma once
#include <memory>
#include <vector>

#include "ir/graph.hpp"

namespace esg::ir {

struct Cut {
  struct Stage {
    std::unique_ptr<Graph> graph;  // no op sized by data; nullptr when the stage computes nothing
    std::vector<ValueId> inputs;   // the cut graph's value behind each input of `graph`
    std::vector<ValueId> outputs;  // ... and behind each of its outputs
    std::vector<NodeId> then_run;  // the ops sized by data that run after it, in graph order
  };
  std::vector<Stage> stages;
};

// Whether some op of the graph (bodies included) is sized by data.
bool has_sized_by_data(const Graph& g);

// The graph's stages. Constants (and other ops of no input) are copied into every stage that
// reads them rather than passed between stages. An op sized by data inside a body is refused
// (ir::Error Unsupported, naming it): a body runs whole, with sizes fixed before it starts.
Cut cut_at_sized_by_data(const Graph& g);

}  // namespace esg::ir
