#include "ir/reinfer.hpp"

#include "ir/error.hpp"
#include "ir/infer.hpp"

namespace esg::ir {

bool reinferable(const Graph& g) {
  for (NodeId n : g.regions[0].nodes)
    if (g.nodes[n].num_bodies) return false;
  return true;
}

std::vector<NodeId> symbolic_nodes(const Graph& g) {
  std::vector<NodeId> out;
  for (NodeId id : g.regions[0].nodes) {
    const Node& n = g.nodes[id];
    if (n.blob != kNone) continue;  // a constant's shape is its data's
    bool is_static = true;
    for (ValueId v : g.inputs(n)) is_static = is_static && (v == kNone || g.shape(v).is_static());
    for (uint32_t i = 0; i < n.num_outputs; ++i) is_static = is_static && g.shape(n.first_output + i).is_static();
    if (!is_static) out.push_back(id);
  }
  return out;
}

void reinfer(Graph& g, const std::vector<Shape>& input_shapes, const std::vector<NodeId>& nodes) {
  if (input_shapes.size() != g.inputs().size())
    throw Error(ErrorCode::InvalidArgument, "the graph takes " + std::to_string(g.inputs().size()) + " input(s), got " +
                                                std::to_string(input_shapes.size()));
  for (size_t i = 0; i < input_shapes.size(); ++i) {
    const ValueId v = g.inputs()[i];
    const Shape want = g.shape(v);
    const Shape& got = input_shapes[i];
    bool fits = want.rank() == got.rank();
    for (size_t d = 0; fits && d < got.rank(); ++d) fits = dim_is_symbolic(want[d]) || want[d] == got[d];
    if (!fits) throw Error(ErrorCode::Shape, "input " + g.value_name(v) + " is " + g.shape_str(want) + ", got " + g.shape_str(got));
    g.set_shape(v, got);
  }
  for (NodeId id : nodes) {
    const Node& n = g.nodes[id];
    if (n.num_bodies) throw Error(ErrorCode::Internal, "reinfer: " + g.node_name(id) + " has a body");
    InferContext ctx(g, *n.op, id);
    try {
      n.op->infer(ctx);
    } catch (const InferFailure& f) {
      throw Error(f.code, std::string(n.op->name) + ": " + f.detail + " (rule `" + n.op->infer_name + "`; inputs " +
                              describe_inputs(g, *n.op, g.inputs(n)) + ")");
    }
  }
}

}  // namespace esg::ir
