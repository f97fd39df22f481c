#include "ir/graph.hpp"

namespace esg::ir {

Graph::Graph(std::string graph_name) : name(std::move(graph_name)) {
  strings.emplace_back();
  string_index_.emplace("", 0);
  regions.emplace_back();
}

StrId Graph::intern(std::string_view s) {
  auto it = string_index_.find(std::string(s));
  if (it != string_index_.end()) return it->second;
  StrId id = static_cast<StrId>(strings.size());
  strings.emplace_back(s);
  string_index_.emplace(strings.back(), id);
  return id;
}

uint32_t Graph::symbol(std::string_view sym) {
  auto it = symbol_index_.find(std::string(sym));
  if (it != symbol_index_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(symbols.size());
  symbols.emplace_back(sym);
  symbol_index_.emplace(symbols.back(), id);
  return id;
}

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
  if (val.producer == kNone) return "arg" + std::to_string(v);
  std::string n = node_name(val.producer);
  return nodes[val.producer].num_outputs == 1 ? n : n + ":" + std::to_string(val.index);
}

}  // namespace esg::ir
