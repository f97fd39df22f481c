#include "runtime/grouping.hpp"

#include <algorithm>
#include <numeric>

namespace esg::runtime {
namespace {

using ir::Graph;
using ir::kNone;
using ir::NodeId;
using ir::ValueId;

// A fused group carries its tiles as doubles, exact for integers up to 2^53: 64-bit integers
// keep their unfused kernels, which compute in int64 or uint64.
bool wide_int(ir::DType t) { return t == ir::DType::I64 || t == ir::DType::U64; }

bool fusible(const Graph& g, NodeId n) {
  const ir::Node& node = g.nodes[n];
  if (node.region != 0 || node.blob != kNone || node.num_bodies != 0 || node.num_deps != 0 || node.num_outputs != 1 ||
      eval::find_elementwise(*node.op) == nullptr || wide_int(g.values[node.first_output].dtype))
    return false;
  for (ValueId v : g.inputs(node))
    if (wide_int(g.values[v].dtype)) return false;
  return true;
}

int find(std::vector<int>& parent, int x) {
  while (parent[static_cast<size_t>(x)] != x) x = parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
  return x;
}

// An op whose result only this group reads, over the group's shape, as the group's head: its
// results computed block by block right before the members that use them. Its operands must
// come from before the group's first member, so that no path from the group leads back into it.
NodeId find_head(const Graph& g, const GroupingRules& rules, const std::vector<NodeId>& members, const std::vector<char>& member,
                 const std::vector<std::vector<NodeId>>& consumers, const std::vector<char>& is_output) {
  const ir::Shape shape = g.shape(g.nodes[members.back()].first_output);
  for (NodeId m : members)
    for (ValueId v : g.inputs(g.nodes[m])) {
      if (v == kNone || g.values[v].producer == kNone) continue;
      const NodeId p = g.values[v].producer;
      const ir::Node& n = g.nodes[p];
      if (n.region != 0 || n.num_deps != 0 || n.num_outputs != 1 || is_output[v] || g.shape(v) != shape ||
          !rules.can_head(g, n, g.nodes[members.front()]))
        continue;
      const auto in = g.inputs(n);
      const bool only_here = std::all_of(consumers[v].begin(), consumers[v].end(), [&](NodeId c) { return member[c] != 0; });
      const bool before = std::all_of(in.begin(), in.end(), [&](ValueId x) {
        return x == kNone || g.values[x].producer == kNone || g.values[x].producer < members.front();
      });
      if (only_here && before) return p;
    }
  return kNone;
}

}  // namespace

std::vector<GroupStep> bind_steps(const Graph& g, const FusedGroup& group) {
  std::vector<GroupStep> steps;
  for (NodeId m : group.members) {
    if (m == group.head) continue;
    const ir::Node& n = g.nodes[m];
    GroupStep s;
    s.node = m;
    s.fn = eval::find_elementwise(*n.op);
    s.dtype = g.values[n.first_output].dtype;
    s.floating = ir::dtype_is_float(s.dtype);
    for (ValueId v : g.inputs(n)) {
      // As the unfused op: in double when any operand (a group input or a member's result) is a float.
      s.floating = s.floating || ir::dtype_is_float(g.values[v].dtype);
      // Steps are the members without the head, in order.
      const auto member_at = std::find_if(group.members.begin(), group.members.end(), [&](NodeId x) { return g.nodes[x].first_output == v; });
      if (member_at != group.members.end() && *member_at == group.head) {
        s.operands.push_back({GroupStep::From::Head, 0});
      } else if (member_at != group.members.end()) {
        s.operands.push_back({GroupStep::From::Step, static_cast<size_t>(member_at - group.members.begin()) - (group.head != kNone)});
      } else {
        s.operands.push_back({GroupStep::From::Input, static_cast<size_t>(std::find(group.inputs.begin(), group.inputs.end(), v) - group.inputs.begin())});
      }
    }
    for (size_t i = 0; i < n.op->attrs.size(); ++i) {
      const ir::AttrValue& a = g.attrs[n.first_attr + i];
      s.attrs.push_back(a.kind == ir::AttrKind::Float ? a.f : static_cast<double>(a.i));
    }
    const auto o = std::find(group.outputs.begin(), group.outputs.end(), n.first_output);
    if (o != group.outputs.end()) s.output = static_cast<int>(o - group.outputs.begin());
    steps.push_back(std::move(s));
  }
  return steps;
}

std::string group_problem(const Graph& g, const FusedGroup& group, const GroupingRules& rules) {
  auto is_value = [&](ValueId v) { return v < g.values.size() && g.values[v].region == 0; };
  if (group.members.empty() || group.members.size() > static_cast<size_t>(std::max(rules.max_ops, 1))) return "a group of " + std::to_string(group.members.size()) + " members";
  for (ValueId v : group.inputs)
    if (!is_value(v)) return "a group input that is no value of the graph";
  std::vector<ValueId> made;  // the members' results so far
  for (size_t i = 0; i < group.members.size(); ++i) {
    const NodeId m = group.members[i];
    if (m >= g.nodes.size() || g.nodes[m].region != 0) return "a member that is no node of the graph";
    const ir::Node& n = g.nodes[m];
    if (m == group.head) {
      if (i != 0 || !rules.can_head || group.members.size() < 2 || n.num_outputs != 1 || !rules.can_head(g, n, g.nodes[group.members[1]]))
        return "a head its backend does not take (" + g.node_name(m) + ")";
    } else if (!fusible(g, m) || (rules.kernel_takes && !rules.kernel_takes(g, n)) ||
               g.shape(n.first_output) != g.shape(g.nodes[group.members.back()].first_output)) {
      return "a member its backend does not fuse (" + g.node_name(m) + ")";
    } else {
      for (ValueId v : g.inputs(n))
        if (std::find(made.begin(), made.end(), v) == made.end() && std::find(group.inputs.begin(), group.inputs.end(), v) == group.inputs.end())
          return "a member reads a value neither a group input nor an earlier member's (" + g.node_name(m) + ")";
    }
    made.push_back(n.first_output);
  }
  if (group.head != kNone && group.members[0] != group.head) return "a head that is not the first member";
  for (ValueId v : group.outputs)
    if (std::find(made.begin(), made.end(), v) == made.end()) return "a group output no member makes";
  return "";
}

std::vector<FusedGroup> find_groups(const Graph& g, const GroupingRules& rules) {
  const std::vector<NodeId>& nodes = g.regions[0].nodes;
  std::vector<std::vector<NodeId>> consumers(g.values.size());
  for (NodeId n : nodes)
    for (ValueId v : g.inputs(g.nodes[n]))
      if (v != kNone) consumers[v].push_back(n);
  std::vector<char> is_output(g.values.size(), 0);
  for (ValueId v : g.outputs()) is_output[v] = 1;

  std::vector<int> domain(g.nodes.size(), 0);
  if (rules.domain)
    for (NodeId n : nodes) domain[n] = rules.domain(g, g.nodes[n]);
  auto fusible_here = [&](NodeId n) { return fusible(g, n) && (!rules.kernel_takes || rules.kernel_takes(g, g.nodes[n])); };
  // Kernels keep a pointer per step on their stack: no group beyond kMaxGroupOps.
  const int max_ops = std::min(rules.max_ops, kMaxGroupOps);
  std::vector<int> parent(g.nodes.size()), size(g.nodes.size(), 1);
  std::iota(parent.begin(), parent.end(), 0);
  for (NodeId n : nodes) {
    if (!fusible_here(n)) continue;
    const ValueId out = g.nodes[n].first_output;
    const ir::Shape shape = g.shape(out);
    for (ValueId v : g.inputs(g.nodes[n])) {
      if (v == kNone || g.values[v].producer == kNone) continue;
      const NodeId p = g.values[v].producer;
      auto same_domain = [&](NodeId a) { return domain[a] == domain[n]; };
      if (!fusible_here(p) || !same_domain(p) || is_output[v] || g.shape(v) != shape) continue;
      const bool stays_inside = std::all_of(consumers[v].begin(), consumers[v].end(), [&](NodeId c) {
        return fusible_here(c) && same_domain(c) && g.shape(g.nodes[c].first_output) == shape;
      });
      const int a = find(parent, static_cast<int>(p)), b = find(parent, static_cast<int>(n));
      if (!stays_inside || a == b || size[static_cast<size_t>(a)] + size[static_cast<size_t>(b)] > max_ops) continue;
      parent[static_cast<size_t>(b)] = a;
      size[static_cast<size_t>(a)] += size[static_cast<size_t>(b)];
    }
  }
  std::vector<std::vector<NodeId>> by_root(g.nodes.size());
  for (NodeId n : nodes)
    if (fusible_here(n)) by_root[static_cast<size_t>(find(parent, static_cast<int>(n)))].push_back(n);

  std::vector<FusedGroup> groups;
  std::vector<char> member(g.nodes.size(), 0);
  std::vector<uint32_t> seen(g.nodes.size(), 0);
  std::vector<int> level(g.nodes.size(), -1);  // splitting a set that cycles (below)
  uint32_t stamp = 0;
  // A set whose group would leave and re-enter itself runs unfused; a backend that wants every
  // op in a group gets each member as a group of its own (those cannot cycle).
  std::vector<std::vector<NodeId>> todo = std::move(by_root);
  for (size_t next = 0; next < todo.size(); ++next) {
    std::vector<NodeId> members = todo[next];
    if (members.empty()) continue;
    for (NodeId m : members) member[m] = 1;
    const NodeId head = rules.can_head ? find_head(g, rules, members, member, consumers, is_output) : kNone;
    if (members.size() < 2 && head == kNone && !rules.single_ops) {
      member[members.front()] = 0;
      continue;
    }
    if (head != kNone) members.insert(members.begin(), head), member[head] = 1;
    FusedGroup grp;
    grp.members = members;
    grp.head = head;
    grp.shape = g.shape(g.nodes[members.back()].first_output);
    for (NodeId m : members) {
      for (ValueId v : g.inputs(g.nodes[m]))
        if (v != kNone && (g.values[v].producer == kNone || !member[g.values[v].producer]) &&
            std::find(grp.inputs.begin(), grp.inputs.end(), v) == grp.inputs.end())
          grp.inputs.push_back(v);
      const ValueId out = g.nodes[m].first_output;
      const bool escapes = is_output[out] || std::any_of(consumers[out].begin(), consumers[out].end(), [&](NodeId c) { return !member[c]; });
      if (escapes) grp.outputs.push_back(out);
    }
    // No path may leave the group and come back: a group input computed from a member. Nodes
    // are in creation order and use only earlier values, so the search stops before the first
    // member: it walks only what lies between the group's members.
    bool cycle = false;
    const NodeId first = members.front();
    ++stamp;
    std::vector<NodeId> work;
    for (ValueId v : grp.inputs)
      if (g.values[v].producer != kNone && g.values[v].producer >= first) work.push_back(g.values[v].producer);
    while (!work.empty() && !cycle) {
      const NodeId n = work.back();
      work.pop_back();
      if (seen[n] == stamp) continue;
      seen[n] = stamp;
      if (member[n]) cycle = true;
      for (ValueId v : g.inputs(g.nodes[n]))
        if (v != kNone && g.values[v].producer != kNone && g.values[v].producer >= first) work.push_back(g.values[v].producer);
    }
    if (cycle) {
      // Split the set where a path leaves it and comes back (an LSTM's cell state feeds the
      // next step's cell after a matmul): a member's level counts the exits on its way from the
      // set's first member, and each level is a set of its own, which no path leaves and
      // re-enters. Only what lies between the first and last member is walked.
      if (head != kNone) member[head] = 0;
      const std::vector<NodeId> body(members.begin() + (head != kNone), members.end());
      const NodeId from = *std::min_element(body.begin(), body.end()), to = *std::max_element(body.begin(), body.end());
      for (NodeId n = from; n <= to; ++n) level[n] = -1;
      for (NodeId n = from; n <= to; ++n) {
        if (g.nodes[n].region != 0) continue;
        int l = member[n] ? 0 : -1;
        for (ValueId v : g.inputs(g.nodes[n])) {
          const NodeId p = v == kNone ? kNone : g.values[v].producer;
          if (p == kNone || p < from || level[p] < 0) continue;
          l = std::max(l, level[p] + (member[p] && !member[n] ? 1 : 0));
        }
        level[n] = l;
      }
      std::vector<std::vector<NodeId>> by_level;
      for (NodeId m : body) {
        const size_t l = static_cast<size_t>(level[m]);
        if (by_level.size() <= l) by_level.resize(l + 1);
        by_level[l].push_back(m);
      }
      for (NodeId m : members) member[m] = 0;
      for (std::vector<NodeId>& part : by_level)
        if (!part.empty() && part.size() < body.size()) todo.push_back(std::move(part));
      continue;
    }
    for (NodeId m : members) member[m] = 0;
    grp.steps = bind_steps(g, grp);
    groups.push_back(std::move(grp));
  }
  return groups;
}

}  // namespace esg::runtime
