#include "schedule/dag.hpp"

#include <algorithm>

#include "ir/error.hpp"

namespace esg::schedule {

std::vector<int> Dag::producers() const {
  std::vector<int> p(value_bytes.size(), -1);
  for (int o = 0; o < num_ops(); ++o)
    for (int v : ops[static_cast<size_t>(o)].outputs) p[static_cast<size_t>(v)] = o;
  return p;
}

GraphDag from_graph(const ir::Graph& g, const std::vector<std::vector<ir::NodeId>>& fused, bool lone_in_place,
                    const ir::Graph* sizes) {
  const ir::Graph& sized = sizes ? *sizes : g;
  GraphDag out;
  std::vector<int> group_of(g.nodes.size(), -1);
  for (size_t k = 0; k < fused.size(); ++k)
    for (ir::NodeId n : fused[k]) group_of[n] = static_cast<int>(k);
  std::vector<char> outside_use(g.values.size(), 0);  // used by a node not in its producer's group
  for (ir::NodeId n : g.regions[0].nodes)
    for (ir::ValueId v : g.inputs(g.nodes[n]))
      if (v != ir::kNone && g.values[v].producer != ir::kNone && (group_of[g.values[v].producer] < 0 || group_of[g.values[v].producer] != group_of[n]))
        outside_use[v] = 1;
  for (ir::ValueId v : g.outputs()) outside_use[v] = 1;
  Dag& d = out.dag;
  std::vector<int>& id = out.value;
  id.assign(g.values.size(), -1);
  auto value = [&](ir::ValueId v) {
    if (id[v] < 0) {
      const ir::Shape s = sized.shape(v);
      if (!s.is_static()) throw ir::Error(ir::ErrorCode::Shape, "planning needs concrete shapes; " + g.value_name(v) + " is " + sized.shape_str(s));
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
    const int k = group_of[n];
    if (k >= 0 && fused[static_cast<size_t>(k)].back() != n) continue;  // a group is one op, at its last member
    out.nodes.push_back(n);
    out.group.push_back(k);
    Dag::Op op;
    const bool elementwise = k >= 0 || (node.op->elementwise && lone_in_place);
    for (ir::NodeId m : k >= 0 ? fused[static_cast<size_t>(k)] : std::vector<ir::NodeId>{n}) {
      for (ir::ValueId v : g.inputs(g.nodes[m]))
        if (v != ir::kNone && (k < 0 || g.values[v].producer == ir::kNone || group_of[g.values[v].producer] != k) &&
            std::find(op.inputs.begin(), op.inputs.end(), value(v)) == op.inputs.end())
          op.inputs.push_back(value(v));
      for (uint32_t i = 0; i < g.nodes[m].num_outputs; ++i)
        if (k < 0 || outside_use[g.nodes[m].first_output + i]) op.outputs.push_back(value(g.nodes[m].first_output + i));
    }
    // In place: an input of the output's exact shape and element width (no broadcast, no
    // widening cast), which an elementwise kernel reads at each index before writing it. A fused
    // group's head (matmul, convolution) reads its operands whole, block after block: never in
    // place.
    if (elementwise && node.num_outputs == 1) {
      const ir::ValueId out_v = node.first_output;
      for (ir::NodeId m : k >= 0 ? fused[static_cast<size_t>(k)] : std::vector<ir::NodeId>{n})
        for (ir::ValueId v : g.nodes[m].op->elementwise ? g.inputs(g.nodes[m]) : ir::Span<ir::ValueId>{})
          if (v != ir::kNone && id[v] >= 0 && std::find(op.inputs.begin(), op.inputs.end(), id[v]) != op.inputs.end() &&
              g.shape(v) == g.shape(out_v) && ir::dtype_size(g.values[v].dtype) == ir::dtype_size(g.values[out_v].dtype) &&
              std::find(op.reusable.begin(), op.reusable.end(), id[v]) == op.reusable.end())
            op.reusable.push_back(id[v]);
    }
    // A view (reshape, squeeze, unsqueeze: the same bytes under another shape) is its input's
    // bytes: the memory plan makes it an alias (no launch) where it can, else it takes over its
    // input's buffer when the input dies there, and its copy is then no copy at all.
    const ir::OpKind kind = node.op->kind;
    if (k < 0 && (kind == ir::OpKind::reshape || kind == ir::OpKind::squeeze || kind == ir::OpKind::unsqueeze)) {
      const ir::ValueId v = g.operands[node.first_input];
      if (id[v] >= 0 && d.value_bytes[static_cast<size_t>(id[v])] == sized.shape(node.first_output).num_elements() *
                                                                          static_cast<int64_t>(ir::dtype_size(g.values[node.first_output].dtype))) {
        op.reusable.push_back(id[v]);
        op.alias = id[v];
      }
    }
    d.ops.push_back(std::move(op));
  }
  for (ir::ValueId v : g.outputs()) d.graph_outputs.push_back(value(v));
  return out;
}

}  // namespace esg::schedule
