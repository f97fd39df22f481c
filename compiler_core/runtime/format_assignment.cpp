#include "runtime/format_assignment.hpp"

#include <algorithm>

namespace esg::runtime {

int FormatPlan::dag_value(const schedule::GraphDag& gd, int op, ir::ValueId v) const {
  if (static_cast<size_t>(op) < bound.size())
    for (const auto& [value, dv] : bound[static_cast<size_t>(op)])
      if (value == v) return dv;
  return gd.value[v];
}

namespace {

// Whether a value of shape `s` is one per channel (and image) of a value of shape `shape`:
// [N or 1, C, 1, …], which elementwise kernels read in the blocked format too (Format::physical_shape).
bool per_channel(const ir::Shape& s, const ir::Shape& shape) {
  if (s.rank() != shape.rank() || s.rank() < 3 || s[1] != shape[1] || (s[0] != 1 && s[0] != shape[0])) return false;
  for (size_t i = 2; i < s.rank(); ++i)
    if (s[i] != 1) return false;
  return true;
}

}  // namespace

FormatPlan assign_formats(const ir::Graph& g, const std::vector<FusedGroup>& groups, const FormatRules& rules, schedule::GraphDag& gd) {
  schedule::Dag& d = gd.dag;
  FormatPlan fp;
  fp.format.assign(static_cast<size_t>(d.num_values()), schedule::Format::row_major());
  fp.reordered.assign(static_cast<size_t>(d.num_ops()), ir::kNone);
  if (!rules.format_of) return fp;
  fp.bound.resize(static_cast<size_t>(d.num_ops()));
  auto bytes = [&](ir::ValueId v, schedule::Format f) {
    return f.physical_elements(g.shape(v)) * static_cast<int64_t>(ir::dtype_size(g.values[v].dtype));
  };
  // The copies of each graph value in the formats made so far, the producer's first.
  std::vector<std::vector<std::pair<schedule::Format, int>>> copies(g.values.size());
  auto copies_of = [&](ir::ValueId v) -> std::vector<std::pair<schedule::Format, int>>& {
    if (copies[v].empty()) copies[v].push_back({schedule::Format::row_major(), gd.value[v]});
    return copies[v];
  };
  auto add_value = [&](ir::ValueId v, schedule::Format f) {
    d.value_bytes.push_back(bytes(v, f));
    fp.format.push_back(f);
    return d.num_values() - 1;
  };
  auto add_reorder = [&](ir::ValueId v, int from, int to) {
    d.ops.push_back({{from}, {to}, {}});
    gd.nodes.push_back(ir::kNone);
    gd.group.push_back(-1);
    fp.reordered.push_back(v);
    fp.bound.emplace_back();
    ++fp.reorders;
  };
  // The DAG value holding `v` in `want`: a copy made before, or a new reorder of the producer's.
  auto copy_in = [&](ir::ValueId v, schedule::Format want) {
    auto& have = copies_of(v);
    for (const auto& [f, dv] : have)
      if (f == want) return dv;
    const int to = add_value(v, want);
    add_reorder(v, have.front().second, to);
    copies[v].push_back({want, to});
    return to;
  };
  std::vector<char> is_output(g.values.size(), 0);
  for (ir::ValueId v : g.outputs()) is_output[v] = 1;
  auto reads_in_format = [&](const ir::Node& n, size_t i) { return rules.reads_in_format ? rules.reads_in_format(g, n, i) : i == 0; };

  const int original_ops = d.num_ops();
  for (int o = 0; o < original_ops; ++o) {
    const ir::NodeId node = gd.nodes[static_cast<size_t>(o)];
    const int k = gd.group[static_cast<size_t>(o)];
    const ir::Node& n = g.nodes[node];
    std::vector<ir::ValueId> reads, writes;
    if (k >= 0) {
      reads = groups[static_cast<size_t>(k)].inputs;
      writes = groups[static_cast<size_t>(k)].outputs;
    } else {
      for (ir::ValueId v : g.inputs(n))
        if (v != ir::kNone && std::find(reads.begin(), reads.end(), v) == reads.end()) reads.push_back(v);
      for (uint32_t i = 0; i < n.num_outputs; ++i) writes.push_back(n.first_output + i);
    }
    // The op's format, and the inputs it reads in it (the rest row-major, or as they are when
    // single elements: element 0 is the value in every format).
    schedule::Format f = schedule::Format::row_major();
    std::vector<ir::ValueId> data;
    const bool elementwise = k >= 0 ? groups[static_cast<size_t>(k)].head == ir::kNone : n.op->elementwise && n.num_outputs == 1;
    if (elementwise && rules.elementwise_any_format) {
      const ir::Shape shape = g.shape(writes.front());
      bool uniform = shape.rank() >= 2;
      std::vector<ir::ValueId> channel_values;
      for (ir::ValueId v : reads) {
        if (g.shape(v) == shape) data.push_back(v);
        else if (per_channel(g.shape(v), shape)) channel_values.push_back(v);
        else uniform = uniform && g.shape(v).num_elements() == 1;
      }
      for (ir::ValueId v : data) uniform = uniform && copies_of(v).front().first == copies_of(data.front()).front().first;
      if (uniform && !data.empty()) f = copies_of(data.front()).front().first;
      data.insert(data.end(), channel_values.begin(), channel_values.end());
    } else if (!elementwise && k < 0 && n.num_outputs == 1 && !reads.empty()) {
      f = rules.format_of(g, n);
      for (size_t i = 0; i < n.num_inputs && f != schedule::Format::row_major(); ++i)
        if (reads_in_format(n, i) && g.operands[n.first_input + i] != ir::kNone) data.push_back(g.operands[n.first_input + i]);
    } else if (k >= 0 && !elementwise && rules.elementwise_any_format) {
      // A headed group computes in its head's format when its members can: the head's first
      // input and the members' operands of the group's shape in it, the members' others single
      // elements (the head's other inputs, filters and the like, stay row-major).
      const FusedGroup& grp = groups[static_cast<size_t>(k)];
      const ir::Node& head = g.nodes[grp.head];
      f = rules.format_of(g, head);
      const ir::ValueId x = g.operands[head.first_input];
      if (f != schedule::Format::row_major() && reads_in_format(head, 0)) data.push_back(x);
      for (const GroupStep& s : grp.steps)
        for (const GroupStep::Operand& a : s.operands) {
          if (a.from != GroupStep::From::Input || f == schedule::Format::row_major()) continue;
          const ir::ValueId v = grp.inputs[a.index];
          // A member reading the images a head reads row-major: one copy cannot serve both.
          if (v == x && !reads_in_format(head, 0)) f = schedule::Format::row_major();
          const bool blocked_too = g.shape(v) == grp.shape || per_channel(g.shape(v), grp.shape);
          if (blocked_too && std::find(data.begin(), data.end(), v) == data.end()) data.push_back(v);
          else if (!blocked_too && g.shape(v).num_elements() != 1) f = schedule::Format::row_major();
        }
      if (f == schedule::Format::row_major()) data.clear();
    }
    auto rebind = [&](std::vector<int>& ids, ir::ValueId v, int dv) {
      std::replace(ids.begin(), ids.end(), gd.value[v], dv);
      fp.bound[static_cast<size_t>(o)].push_back({v, dv});
    };
    for (ir::ValueId v : reads) {
      const bool is_data = std::find(data.begin(), data.end(), v) != data.end();
      if (!is_data && g.shape(v).num_elements() == 1) continue;
      const int dv = copy_in(v, is_data ? f : schedule::Format::row_major());
      if (dv == gd.value[v]) continue;
      rebind(d.ops[static_cast<size_t>(o)].inputs, v, dv);
      schedule::Dag::Op& op = d.ops[static_cast<size_t>(o)];
      std::replace(op.reusable.begin(), op.reusable.end(), gd.value[v], dv);
      if (op.alias == gd.value[v]) op.alias = dv;  // a view of the row-major copy, not of the blocked bytes
    }
    for (ir::ValueId v : writes) {
      copies[v].clear();
      if (f == schedule::Format::row_major()) continue;
      if (!is_output[v]) {  // the value itself is blocked
        const int dv = gd.value[v];
        d.value_bytes[static_cast<size_t>(dv)] = bytes(v, f);
        fp.format[static_cast<size_t>(dv)] = f;
        copies[v].push_back({f, dv});
        continue;
      }
      // The caller's output is row-major: the op writes a blocked value a reorder copies out.
      const int blocked = add_value(v, f);
      rebind(d.ops[static_cast<size_t>(o)].outputs, v, blocked);
      copies[v].push_back({f, blocked});
      add_reorder(v, blocked, gd.value[v]);
      copies[v].push_back({schedule::Format::row_major(), gd.value[v]});
    }
  }
  return fp;
}

}  // namespace esg::runtime
