#include "ir/cut.hpp"

#include <algorithm>
#include <set>

#include "ir/builder.hpp"
#include "ir/error.hpp"
#include "ir/replay.hpp"

namespace esg::ir {

bool has_sized_by_data(const Graph& g) {
  for (NodeId n = 0; n < g.nodes.size(); ++n)
    if (g.nodes[n].op->sized_by_data) return true;
  return false;
}

namespace {

// An op of no operand and no body (a constant): copied wherever it is read, never passed on.
bool copied_where_read(const Node& n) { return n.num_inputs == 0 && n.num_bodies == 0 && !n.op->sized_by_data; }

}  // namespace

Cut cut_at_sized_by_data(const Graph& g) {
  for (NodeId n = 0; n < g.nodes.size(); ++n)
    if (g.nodes[n].op->sized_by_data && g.nodes[n].region != 0)
      throw Error(ErrorCode::Unsupported, "`" + g.node_name(n) + "` (" + g.nodes[n].op->name +
                                              ") decides its output sizes as it runs, inside a body: bodies run with sizes fixed before they start");
  const std::vector<NodeId>& order = g.regions[0].nodes;
  // Each node's stage: the most ops sized by data on a path to it (through operands and
  // control dependencies); such an op runs after the stage of its operands.
  std::vector<int> stage(g.nodes.size(), 0), ready(g.values.size(), 0);  // ready: the first stage a value is there for
  int stages = 1;
  for (NodeId id : order) {
    const Node& n = g.nodes[id];
    int s = 0;
    for (ValueId v : g.inputs(n))
      if (v != kNone) s = std::max(s, ready[v]);
    // A constant has nothing to order: stage 0 whatever its dependencies, copied where read.
    if (!copied_where_read(n))
      for (NodeId d : g.deps(n)) s = std::max(s, stage[d] + (g.nodes[d].op->sized_by_data ? 1 : 0));
    stage[id] = s;
    const int after = s + (n.op->sized_by_data ? 1 : 0);
    for (uint32_t i = 0; i < n.num_outputs; ++i) ready[n.first_output + i] = after;
    stages = std::max(stages, after + 1);
  }

  Cut cut;
  cut.stages.resize(static_cast<size_t>(stages));
  std::vector<std::set<ValueId>> outputs(static_cast<size_t>(stages));
  // `v` read by a node of stage `reader` (-1: by an op sized by data, or as a graph output):
  // an output of the stage that makes it unless the reader makes it too or copies it.
  auto read = [&](ValueId v, int reader) {
    if (v == kNone || g.values[v].producer == kNone) return;  // absent, or a graph input
    const NodeId p = g.values[v].producer;
    if (g.nodes[p].op->sized_by_data) return;  // handed over between stages
    if (reader == stage[p] || (reader > 0 && copied_where_read(g.nodes[p]))) return;
    outputs[static_cast<size_t>(stage[p])].insert(v);
  };
  for (NodeId id : order) {
    const Node& n = g.nodes[id];
    const bool sized = n.op->sized_by_data;
    for (ValueId v : g.inputs(n)) read(v, sized ? -1 : stage[id]);
    if (sized) cut.stages[static_cast<size_t>(stage[id])].then_run.push_back(id);
  }
  for (ValueId v : g.outputs()) read(v, -1);

  for (int k = 0; k < stages; ++k) {
    Cut::Stage& st = cut.stages[static_cast<size_t>(k)];
    auto member = [&](NodeId id) { return !g.nodes[id].op->sized_by_data && stage[id] == k && (k == 0 || !copied_where_read(g.nodes[id])); };
    // What the stage reads from outside: graph inputs, sized ops' outputs, earlier stages' outputs.
    std::set<NodeId> copies;  // constants it reads
    std::vector<ValueId> inputs;
    std::set<ValueId> seen;
    bool any = false;
    for (NodeId id : order) {
      if (!member(id)) continue;
      any = true;
      for (ValueId v : g.inputs(g.nodes[id])) {
        if (v == kNone) continue;
        const NodeId p = g.values[v].producer;
        if (p != kNone && member(p)) continue;
        if (p != kNone && k > 0 && copied_where_read(g.nodes[p])) {
          copies.insert(p);
          continue;
        }
        if (seen.insert(v).second) inputs.push_back(v);
      }
    }
    if (!any || outputs[static_cast<size_t>(k)].empty()) continue;  // nothing it makes is read
    Builder b(g.name + "/stage" + std::to_string(k));
    for (const std::string& s : g.symbols) b.graph().symbol(s);
    Replay replay(g, b, [&](Replay&, NodeId id) {
      if (g.nodes[id].region != 0) return false;  // a body of a member: copied with it
      return !(member(id) || copies.count(id));
    });
    for (ValueId v : inputs) replay.set(v, b.add_input(g.value_name(v), g.values[v].dtype, g.shape(v)));
    replay.region(0);
    st.inputs = inputs;
    st.outputs.assign(outputs[static_cast<size_t>(k)].begin(), outputs[static_cast<size_t>(k)].end());
    std::vector<ValueId> outs;
    for (ValueId v : st.outputs) outs.push_back(replay.get(v));
    st.graph = b.finish(outs);
  }
  // A sized op whose outputs only leave the graph leaves an empty stage after it.
  while (cut.stages.size() > 1 && !cut.stages.back().graph && cut.stages.back().then_run.empty()) cut.stages.pop_back();
  return cut;
}

}  // namespace esg::ir
