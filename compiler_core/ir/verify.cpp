#include "ir/verify.hpp"

#include <string>
#include <vector>

#include "ir/error.hpp"

namespace esg::ir {

void verify(const Graph& g) {
  auto fail = [](const std::string& what) { throw Error(ErrorCode::Internal, "graph invariant violated: " + what); };
  std::vector<bool> defined(g.values.size(), false);
  for (size_t r = 0; r < g.regions.size(); ++r) {
    const Region& reg = g.regions[r];
    if (r != 0 && (reg.parent >= r || reg.owner >= g.nodes.size())) fail("region " + std::to_string(r) + " has no valid parent/owner");
    if (reg.captures_inner.size() != reg.captures_outer.size()) fail("unpaired captures in region " + std::to_string(r));
    for (ValueId p : reg.params) {
      if (p < g.values.size() && g.values[p].dims + g.values[p].rank > g.dims.size()) fail("a parameter's shape is outside the pool");
      if (p >= g.values.size() || g.values[p].region != r || g.values[p].producer != kNone) fail("bad parameter in region " + std::to_string(r));
      defined[p] = true;
    }
    for (size_t c = 0; c < reg.captures_inner.size(); ++c) {
      const ValueId in = reg.captures_inner[c], out = reg.captures_outer[c];
      if (in >= g.values.size() || out >= g.values.size() || g.values[in].region != r ||
          (r != 0 && g.values[out].region != reg.parent))
        fail("bad capture in region " + std::to_string(r));
      defined[in] = true;
    }
  }
  // Nodes in creation order: every operand is defined earlier, in the node's own region.
  for (NodeId id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    const std::string where = "node " + g.node_name(id);
    if (!n.op) fail(where + " has no op");
    if (n.first_input + n.num_inputs > g.operands.size() || n.first_attr + n.op->attrs.size() > g.attrs.size() ||
        n.first_output + n.num_outputs > g.values.size() || n.first_body + n.num_bodies > g.body_refs.size() ||
        n.first_dep + n.num_deps > g.dep_refs.size() || n.first_note + 2 * n.num_notes > g.notes.size())
      fail(where + " has ranges outside the graph's pools");
    for (ValueId v : g.inputs(n)) {
      if (v == kNone) continue;
      if (v >= g.values.size() || !defined[v]) fail(where + " uses a value defined after it or never");
      if (g.values[v].region != n.region) fail(where + " uses a value of another region");
    }
    for (NodeId d : g.deps(n))
      if (d >= id || g.nodes[d].region != n.region) fail(where + " depends on a later node or another region");
    for (RegionId b : g.bodies(n))
      if (b >= g.regions.size() || g.regions[b].owner != id) fail(where + " names a body it does not own");
    for (uint32_t i = 0; i < n.num_outputs; ++i) {
      const Value& v = g.values[n.first_output + i];
      if (v.producer != id || v.index != i || v.region != n.region || !dtype_valid(v.dtype)) fail(where + " has an inconsistent output");
      defined[n.first_output + i] = true;
    }
    if ((n.blob != kNone) != (n.op == &constant_op())) fail(where + " constant data mismatch");
    if (n.blob != kNone && (n.blob >= g.blobs.size() || !g.blobs[n.blob] ||
                            g.blobs[n.blob]->size() != static_cast<size_t>(g.shape(n.first_output).num_elements()) * dtype_size(g.values[n.first_output].dtype)))
      fail(where + " has constant data of the wrong size");
  }
  for (size_t r = 0; r < g.regions.size(); ++r)
    for (ValueId v : g.regions[r].results)
      if (v >= g.values.size() || !defined[v] || g.values[v].region != r) fail("region " + std::to_string(r) + " returns an undefined value");
}

}  // namespace esg::ir
