#include "ir/printer.hpp"

#include <cstdio>

namespace esg::ir {
namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string ref(const Graph& g, ValueId v) { return v == kNone ? "none" : "%" + g.value_name(v); }

class TextPrinter {
 public:
  explicit TextPrinter(const Graph& g) : g_(g) {}

  std::string run() {
    out_ = "graph " + g_.name + "(";
    params(g_.regions[0].params);
    out_ += ") {\n";
    region(0, 1);
    out_ += "}\n";
    return out_;
  }

 private:
  void params(const std::vector<ValueId>& ps) {
    for (size_t i = 0; i < ps.size(); ++i) out_ += (i ? ", " : "") + ref(g_, ps[i]) + ": " + g_.type_str(ps[i]);
  }

  void region(RegionId r, int depth) {
    const std::string pad(static_cast<size_t>(depth) * 2, ' ');
    const Region& reg = g_.regions[r];
    for (NodeId n : reg.nodes) node(n, depth);
    out_ += pad + "return";
    for (size_t i = 0; i < reg.results.size(); ++i) out_ += (i ? ", " : " ") + ref(g_, reg.results[i]);
    out_ += "\n";
  }

  void node(NodeId id, int depth) {
    const std::string pad(static_cast<size_t>(depth) * 2, ' ');
    const Node& n = g_.nodes[id];
    out_ += pad;
    for (uint32_t i = 0; i < n.num_outputs; ++i) out_ += (i ? ", " : "") + ref(g_, n.first_output + i);
    out_ += " = " + std::string(n.op->name) + "(";
    const Span<ValueId> ins = g_.inputs(n);
    uint32_t shown = n.num_inputs - n.num_captures;
    while (shown > 0 && ins[shown - 1] == kNone) --shown;  // absent trailing optional inputs
    for (uint32_t i = 0; i < shown; ++i) out_ += (i ? ", " : "") + ref(g_, ins[i]);
    out_ += ")";
    if (n.num_captures) {
      out_ += " captures(";
      for (uint32_t i = n.num_inputs - n.num_captures; i < n.num_inputs; ++i)
        out_ += (i > n.num_inputs - n.num_captures ? ", " : "") + ref(g_, ins[i]);
      out_ += ")";
    }
    std::string attrs;
    const Span<AttrValue> av = g_.node_attrs(n);
    for (size_t i = 0; i < av.size(); ++i)
      attrs += (attrs.empty() ? "" : ", ") + std::string(n.op->attrs[i].name) + "=" + attr_str(g_, n.op->attrs[i], av[i]);
    if (n.blob != kNone) attrs += "bytes=" + std::to_string(g_.blobs[n.blob]->size());
    for (uint32_t i = 0; i < n.num_notes; ++i)
      attrs += (attrs.empty() ? "@" : ", @") + g_.strings[g_.notes[n.first_note + 2 * i]] + "=\"" +
               g_.strings[g_.notes[n.first_note + 2 * i + 1]] + "\"";
    if (!attrs.empty()) out_ += " {" + attrs + "}";
    if (n.num_deps) {
      out_ += " after(";
      for (uint32_t i = 0; i < n.num_deps; ++i) out_ += (i ? ", " : "") + g_.node_name(g_.dep_refs[n.first_dep + i]);
      out_ += ")";
    }
    out_ += " : ";
    for (uint32_t i = 0; i < n.num_outputs; ++i) out_ += (i ? ", " : "") + g_.type_str(n.first_output + i);
    out_ += "\n";
    const Span<RegionId> bodies = g_.bodies(n);
    for (size_t b = 0; b < bodies.size(); ++b) {
      const Region& body = g_.regions[bodies[b]];
      out_ += pad + "  " + n.op->subgraphs[b].name + "(";
      params(body.params);
      for (size_t c = 0; c < body.captures_inner.size(); ++c)
        out_ += (body.params.empty() && c == 0 ? "" : ", ") + ref(g_, body.captures_inner[c]) + " <- " +
                ref(g_, body.captures_outer[c]);
      out_ += ") {\n";
      region(bodies[b], depth + 2);
      out_ += pad + "  }\n";
    }
  }

  const Graph& g_;
  std::string out_;
};

std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string attr_str(const Graph& g, const AttrSchema& schema, const AttrValue& v) {
  switch (v.kind) {
    case AttrKind::Int: return std::to_string(v.i);
    case AttrKind::Bool: return v.i ? "true" : "false";
    case AttrKind::Float: return num(v.f);
    case AttrKind::DType: return dtype_name(static_cast<DType>(v.i));
    case AttrKind::Enum:
      return v.i >= 0 && v.i < static_cast<int64_t>(schema.num_enum_values) ? schema.enum_values[v.i] : "?";
    case AttrKind::String: return "\"" + g.string_of(v) + "\"";
    case AttrKind::IntList: {
      std::string s = "[";
      for (size_t i = 0; i < v.size; ++i) s += (i ? "," : "") + std::to_string(g.ints_of(v)[i]);
      return s + "]";
    }
    case AttrKind::FloatList: {
      std::string s = "[";
      for (size_t i = 0; i < v.size; ++i) s += (i ? "," : "") + num(g.floats_of(v)[i]);
      return s + "]";
    }
  }
  return "?";
}

std::string to_text(const Graph& g) { return TextPrinter(g).run(); }

std::string to_dot(const Graph& g) {
  std::string out = "digraph \"" + dot_escape(g.name) + "\" {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n";
  auto value_node = [&](ValueId v) {
    // Params are drawn as their own ellipses; node outputs start at their producer.
    const Value& val = g.values[v];
    return val.producer == kNone ? "v" + std::to_string(v) : "n" + std::to_string(val.producer);
  };
  for (ValueId v = 0; v < g.values.size(); ++v)
    if (g.values[v].producer == kNone)
      out += "  v" + std::to_string(v) + " [shape=ellipse, label=\"" + dot_escape(g.value_name(v)) + "\\n" + dot_escape(g.type_str(v)) + "\"];\n";
  std::vector<std::string> clusters(g.regions.size());
  for (NodeId id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    const std::string label = dot_escape(n.op->name) + "\\n" + dot_escape(g.node_name(id));
    clusters[n.region] += "    n" + std::to_string(id) + " [label=\"" + label + "\"];\n";
    const Span<ValueId> ins = g.inputs(n);
    for (ValueId v : ins)
      if (v != kNone)
        out += "  " + value_node(v) + " -> n" + std::to_string(id) + " [label=\"" + dot_escape(g.type_str(v)) + "\"];\n";
    for (uint32_t i = 0; i < n.num_deps; ++i)
      out += "  n" + std::to_string(g.dep_refs[n.first_dep + i]) + " -> n" + std::to_string(id) + " [style=dashed];\n";
  }
  for (RegionId r = 0; r < g.regions.size(); ++r) {
    const Region& reg = g.regions[r];
    std::string params;
    for (ValueId p : reg.params) params += "    v" + std::to_string(p) + ";\n";
    for (ValueId p : reg.captures_inner) params += "    v" + std::to_string(p) + ";\n";
    if (r == 0) {
      out += clusters[0];
    } else {
      const std::string title = reg.owner == kNone ? "body" : g.node_name(reg.owner);
      out += "  subgraph cluster_" + std::to_string(r) + " {\n    label=\"" + dot_escape(title) + "\";\n    style=rounded;\n" +
             params + clusters[r] + "  }\n";
    }
    for (size_t i = 0; i < reg.results.size(); ++i) {
      const std::string sink = "r" + std::to_string(r) + "_" + std::to_string(i);
      out += "  " + sink + " [shape=plaintext, label=\"" + (r == 0 ? "output " : "result ") + std::to_string(i) + "\"];\n";
      out += "  " + value_node(reg.results[i]) + " -> " + sink + ";\n";
    }
  }
  return out + "}\n";
}

}  // namespace esg::ir
