#include "ir/graph.hpp"

#include <algorithm>

#include "ir/utf8.hpp"

namespace esg::ir {

Graph::Graph(std::string graph_name) : name(std::move(graph_name)) {
  check_utf8(name, "a graph's name");
  strings.emplace_back();
  string_index_.emplace("", 0);
  regions.emplace_back();
}

namespace {
// The index of `s` in `table`, appending it the first time.
uint32_t intern_in(std::vector<std::string>& table, std::unordered_map<std::string, uint32_t>& index,
                   std::string_view s) {
  const auto found = index.find(std::string(s));
  if (found != index.end()) return found->second;
  check_utf8(s, "a name or string");  // once per distinct string
  const auto [it, added] = index.emplace(std::string(s), static_cast<uint32_t>(table.size()));
  if (added) table.emplace_back(s);
  return it->second;
}
}  // namespace

StrId Graph::intern(std::string_view s) { return intern_in(strings, string_index_, s); }

uint32_t Graph::symbol(std::string_view sym) { return intern_in(symbols, symbol_index_, sym); }

std::string Graph::dim_str(Dim d) const {
  if (!dim_is_symbolic(d)) return std::to_string(d);
  uint32_t s = dim_symbol(d);
  return s < symbols.size() ? symbols[s] : "?";
}

std::string Graph::shape_str(const Shape& s) const {
  std::string out = "[";
  for (size_t i = 0; i < s.rank(); ++i) {
    if (i) out += ',';
    out += dim_str(s[i]);
  }
  return out + ']';
}

std::string Graph::type_str(ValueId v) const {
  return std::string(dtype_name(values[v].dtype)) + shape_str(shape(v));
}

std::string Graph::node_name(NodeId n) const {
  const Node& node = nodes[n];
  std::string base = node.name ? strings[node.name] : std::string(node.op->name) + "_" + std::to_string(n);
  return node.scope ? strings[node.scope] + "/" + base : base;
}

std::string Graph::value_name(ValueId v) const {
  const Value& val = values[v];
  if (val.name) return strings[val.name];
  if (val.producer == kNone) {
    // Parameters are named by where they sit, not by value id, so that a graph prints the
    // same after a save and load: "input<i>", "<node>.<body>.p<i>" or ".c<i>" for a capture.
    const Region& r = regions[val.region];
    auto index_in = [v](const std::vector<ValueId>& ids) {
      return std::to_string(std::find(ids.begin(), ids.end(), v) - ids.begin());
    };
    const bool is_param = std::find(r.params.begin(), r.params.end(), v) != r.params.end();
    if (val.region == 0) return "input" + index_in(r.params);
    std::string body = "body";
    if (r.owner != kNone) {
      const Node& owner = nodes[r.owner];
      const Span<RegionId> bs = bodies(owner);
      const size_t k = static_cast<size_t>(std::find(bs.begin(), bs.end(), val.region) - bs.begin());
      body = node_name(r.owner) + "." + (k < owner.op->subgraphs.size() ? owner.op->subgraphs[k].name : "body");
    }
    return body + (is_param ? ".p" + index_in(r.params) : ".c" + index_in(r.captures_inner));
  }
  std::string n = node_name(val.producer);
  return nodes[val.producer].num_outputs == 1 ? n : n + ":" + std::to_string(val.index);
}

}  // namespace esg::ir
