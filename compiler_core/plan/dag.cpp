#include "plan/dag.hpp"

#include "ir/error.hpp"

namespace esg::plan {

std::vector<int> Dag::producers() const {
  std::vector<int> p(value_bytes.size(), -1);
  for (int o = 0; o < num_ops(); ++o)
    for (int v : ops[static_cast<size_t>(o)].outputs) p[static_cast<size_t>(v)] = o;
  return p;
}

GraphDag from_graph(const ir::Graph& g) {
  GraphDag out;
  Dag& d = out.dag;
  std::vector<int>& id = out.value;
  id.assign(g.values.size(), -1);
  auto value = [&](ir::ValueId v) {
    if (id[v] < 0) {
      const ir::Shape s = g.shape(v);
      if (!s.is_static()) throw ir::Error(ir::ErrorCode::Shape, "planning needs concrete shapes; " + g.value_name(v) + " is " + g.shape_str(s));
      id[v] = d.num_values();
      d.value_bytes.push_back(s.num_elements() * static_cast<int64_t>(ir::dtype_size(g.values[v].dtype)));
    }
    return id[v];
  };
  for (ir::ValueId v : g.inputs()) d.graph_inputs.push_back(value(v));
  for (ir::NodeId n : g.regions[0].nodes) {
    const ir::Node& node = g.nodes[n];
    if (node.blob != ir::kNone) {
      d.graph_inputs.push_back(value(node.first_output));
      continue;
    }
    out.nodes.push_back(n);
    Dag::Op op;
    op.elementwise = node.op->elementwise;
    for (ir::ValueId v : g.inputs(node))
      if (v != ir::kNone) op.inputs.push_back(value(v));
    for (uint32_t i = 0; i < node.num_outputs; ++i) op.outputs.push_back(value(node.first_output + i));
    d.ops.push_back(std::move(op));
  }
  for (ir::ValueId v : g.outputs()) d.graph_outputs.push_back(value(v));
  return out;
}

}  // namespace esg::plan
