#include "ir/replay.hpp"

#include "ir/error.hpp"

namespace esg::ir {

ValueId Replay::get(ValueId v) {
  while (!map_.count(v)) {
    const Region& reg = from_.regions[from_.values[v].region];
    size_t i = 0;
    while (i < reg.captures_inner.size() && reg.captures_inner[i] != v) ++i;
    if (i == reg.captures_inner.size()) throw Error(ErrorCode::Internal, "replay: " + from_.value_name(v) + " has no new value");
    v = reg.captures_outer[i];
  }
  return map_.at(v);
}

void Replay::region(RegionId r) {
  for (NodeId n : from_.regions[r].nodes)
    if (!hook_ || !hook_(*this, n)) copy(n);
}

NodeId Replay::copy(NodeId id) {
  const Graph& g = from_;
  const Node& n = g.nodes[id];
  NodeId made;
  if (n.blob != kNone) {
    const ValueId out = n.first_output;
    made = to_.graph().values[to_.add_constant(g.values[out].dtype, g.shape(out), g.blobs[n.blob])].producer;
  } else {
    std::vector<RegionId> bodies;
    for (RegionId body : g.bodies(n)) {
      const Region& reg = g.regions[body];
      std::vector<ValueId> like;
      if (n.op->subgraphs[bodies.size()].params_input >= 0)  // a loop: parameters shaped as the loop values
        for (uint32_t i = 0; i < n.num_inputs - n.num_captures; ++i) like.push_back(get(g.operands[n.first_input + i]));
      to_.begin_region(like);
      const Span<ValueId> params = to_.region_params();
      for (size_t i = 0; i < reg.params.size(); ++i) map_[reg.params[i]] = params[i];
      region(body);
      std::vector<ValueId> results;
      for (ValueId v : reg.results) results.push_back(get(v));
      bodies.push_back(to_.end_region(results));
    }
    std::vector<ValueId> inputs;
    for (uint32_t i = 0; i < n.num_inputs - n.num_captures; ++i) {
      const ValueId v = g.operands[n.first_input + i];
      inputs.push_back(v == kNone ? kNone : get(v));
    }
    std::vector<AttrArg> attrs;
    for (size_t i = 0; i < n.op->attrs.size(); ++i) {
      const AttrValue& a = g.attrs[n.first_attr + i];
      AttrArg arg;
      arg.kind = a.kind;
      arg.present = true;
      arg.i = a.kind == AttrKind::Float ? 0 : a.i;
      arg.f = a.kind == AttrKind::Float ? a.f : 0;
      if (a.kind == AttrKind::String) arg.s = g.string_of(a).c_str();
      if (a.kind == AttrKind::IntList) arg.ints = g.ints_of(a).data(), arg.size = a.size;
      if (a.kind == AttrKind::FloatList) arg.floats = g.floats_of(a).data(), arg.size = a.size;
      attrs.push_back(arg);
    }
    made = to_.add_op(*n.op, inputs, attrs, bodies);
  }
  Graph& t = to_.graph();
  Node& m = t.nodes[made];
  if (n.name) m.name = t.intern(g.strings[n.name]);
  if (n.scope) m.scope = t.intern(g.strings[n.scope]);
  m.first_note = static_cast<uint32_t>(t.notes.size());
  m.num_notes = n.num_notes;
  for (uint32_t i = 0; i < 2 * n.num_notes; ++i) t.notes.push_back(t.intern(g.strings[g.notes[n.first_note + i]]));
  m.first_dep = static_cast<uint32_t>(t.dep_refs.size());
  for (NodeId d : g.deps(n))
    if (nodes_.count(d)) t.dep_refs.push_back(nodes_.at(d));
  m.num_deps = static_cast<uint32_t>(t.dep_refs.size() - m.first_dep);
  for (uint32_t i = 0; i < n.num_outputs; ++i) {
    const ValueId nv = m.first_output + i;
    map_[n.first_output + i] = nv;
    if (g.values[n.first_output + i].name) t.values[nv].name = t.intern(g.strings[g.values[n.first_output + i].name]);
  }
  nodes_[id] = made;
  return made;
}

std::unique_ptr<Graph> rebuild(const Graph& g, const std::vector<Shape>* input_shapes, const Replay::Hook& hook) {
  Builder b(g.name);
  for (const std::string& s : g.symbols) b.graph().symbol(s);
  Replay replay(g, b, hook);
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const ValueId v = g.inputs()[i];
    replay.set(v, b.add_input(g.values[v].name ? g.strings[g.values[v].name] : "", g.values[v].dtype,
                              input_shapes ? (*input_shapes)[i] : g.shape(v)));
  }
  replay.region(0);
  std::vector<ValueId> outs;
  for (ValueId v : g.outputs()) outs.push_back(replay.get(v));
  return b.finish(outs);
}

}  // namespace esg::ir
