// C entry points that read a finished graph: its bodies (the top level and those of if/while
// nodes), values, nodes, attributes and constants — what an exporter needs, in the graph's own
// terms (ids checked, never trusted).
#include <string>

#include "c_api/handles.hpp"

using esg::capi::guarded;
namespace ir = esg::ir;

namespace {

const ir::Graph& graph_of(const esg_graph* g, const char* fn) {
  if (!g || !g->g) throw ir::Error(ir::ErrorCode::InvalidArgument, std::string(fn) + ": the graph is NULL");
  return *g->g;
}

ir::ValueId value_of(const ir::Graph& g, int64_t v, const char* fn) {
  if (v < 0 || static_cast<uint64_t>(v) >= g.values.size())
    throw ir::Error(ir::ErrorCode::InvalidArgument, std::string(fn) + ": no value " + std::to_string(v));
  return static_cast<ir::ValueId>(v);
}

const ir::Node& node_of(const ir::Graph& g, int64_t node, const char* fn) {
  if (node < 0 || static_cast<uint64_t>(node) >= g.nodes.size())
    throw ir::Error(ir::ErrorCode::InvalidArgument, std::string(fn) + ": no node " + std::to_string(node) + " (the graph has " +
                                                         std::to_string(g.nodes.size()) + ")");
  return g.nodes[static_cast<size_t>(node)];
}

const ir::Region& body_of(const ir::Graph& g, int64_t body, const char* fn) {
  if (body < 0 || static_cast<uint64_t>(body) >= g.regions.size())
    throw ir::Error(ir::ErrorCode::InvalidArgument, std::string(fn) + ": no body " + std::to_string(body));
  return g.regions[static_cast<size_t>(body)];
}

template <class T>
T at(const std::vector<T>& list, size_t index, const char* fn, const char* what) {
  if (index >= list.size())
    throw ir::Error(ir::ErrorCode::InvalidArgument, std::string(fn) + ": no " + what + " " + std::to_string(index) + " (there are " +
                                                         std::to_string(list.size()) + ")");
  return list[index];
}

const ir::AttrValue& attr_of(const ir::Graph& g, const ir::Node& n, size_t attr, const char* fn) {
  const size_t count = n.op->attrs.size();
  if (attr >= count)
    throw ir::Error(ir::ErrorCode::InvalidArgument, std::string(fn) + ": op " + n.op->name + " has " + std::to_string(count) +
                                                         " attribute(s), no " + std::to_string(attr));
  return g.attrs[n.first_attr + attr];
}

template <class T, class F>
T read(T fallback, F&& f) {
  T out = fallback;
  guarded(nullptr, [&] { out = f(); });
  return out;
}

// A body's list (nodes, params or results): its length, or one entry.
size_t body_list_size(const esg_graph* graph, int64_t body, std::vector<uint32_t> ir::Region::*list, const char* fn) {
  return read<size_t>(0, [&] { return (body_of(graph_of(graph, fn), body, fn).*list).size(); });
}

int64_t body_list_item(const esg_graph* graph, int64_t body, size_t index, std::vector<uint32_t> ir::Region::*list,
                       const char* fn, const char* what) {
  return read<int64_t>(-1, [&]() -> int64_t { return at(body_of(graph_of(graph, fn), body, fn).*list, index, fn, what); });
}

}  // namespace

extern "C" {

ESG_API const char* esg_graph_name(const esg_graph* graph) {
  return read<const char*>(nullptr, [&] { return graph_of(graph, "esg_graph_name").name.c_str(); });
}

ESG_API size_t esg_graph_input_count(const esg_graph* graph) {
  return read<size_t>(0, [&] { return graph_of(graph, "esg_graph_input_count").inputs().size(); });
}

ESG_API int64_t esg_graph_input(const esg_graph* graph, size_t index) {
  return read<int64_t>(-1, [&]() -> int64_t { return at(graph_of(graph, "esg_graph_input").inputs(), index, "esg_graph_input", "input"); });
}

ESG_API size_t esg_graph_output_count(const esg_graph* graph) {
  return read<size_t>(0, [&] { return graph_of(graph, "esg_graph_output_count").outputs().size(); });
}

ESG_API int64_t esg_graph_output(const esg_graph* graph, size_t index) {
  return read<int64_t>(-1, [&]() -> int64_t { return at(graph_of(graph, "esg_graph_output").outputs(), index, "esg_graph_output", "output"); });
}

ESG_API size_t esg_graph_body_node_count(const esg_graph* graph, int64_t body) {
  return body_list_size(graph, body, &ir::Region::nodes, "esg_graph_body_node_count");
}

ESG_API int64_t esg_graph_body_node(const esg_graph* graph, int64_t body, size_t index) {
  return body_list_item(graph, body, index, &ir::Region::nodes, "esg_graph_body_node", "node");
}

ESG_API size_t esg_graph_body_param_count(const esg_graph* graph, int64_t body) {
  return body_list_size(graph, body, &ir::Region::params, "esg_graph_body_param_count");
}

ESG_API int64_t esg_graph_body_param(const esg_graph* graph, int64_t body, size_t index) {
  return body_list_item(graph, body, index, &ir::Region::params, "esg_graph_body_param", "parameter");
}

ESG_API size_t esg_graph_body_result_count(const esg_graph* graph, int64_t body) {
  return body_list_size(graph, body, &ir::Region::results, "esg_graph_body_result_count");
}

ESG_API int64_t esg_graph_body_result(const esg_graph* graph, int64_t body, size_t index) {
  return body_list_item(graph, body, index, &ir::Region::results, "esg_graph_body_result", "result");
}

ESG_API size_t esg_graph_body_capture_count(const esg_graph* graph, int64_t body) {
  return read<size_t>(0, [&] {
    return body_of(graph_of(graph, "esg_graph_body_capture_count"), body, "esg_graph_body_capture_count").captures_inner.size();
  });
}

ESG_API int64_t esg_graph_body_capture(const esg_graph* graph, int64_t body, size_t index, int64_t* outer) {
  if (outer) *outer = -1;
  return read<int64_t>(-1, [&]() -> int64_t {
    const ir::Region& r = body_of(graph_of(graph, "esg_graph_body_capture"), body, "esg_graph_body_capture");
    const ir::ValueId inner = at(r.captures_inner, index, "esg_graph_body_capture", "capture");
    if (outer) *outer = r.captures_outer[index];
    return inner;
  });
}

ESG_API const char* esg_graph_value_name(const esg_graph* graph, int64_t value) {
  return read<const char*>(nullptr, [&] {
    const ir::Graph& g = graph_of(graph, "esg_graph_value_name");
    const ir::ValueId v = value_of(g, value, "esg_graph_value_name");
    esg_graph* owner = const_cast<esg_graph*>(graph);  // the name cache only; the graph stays as it is
    std::call_once(owner->names_once, [&] {
      owner->value_names.reserve(g.values.size());
      for (ir::ValueId i = 0; i < g.values.size(); ++i) owner->value_names.push_back(g.value_name(i));
    });
    return owner->value_names[v].c_str();
  });
}

ESG_API esg_dtype esg_graph_value_dtype(const esg_graph* graph, int64_t value) {
  return read<esg_dtype>(static_cast<esg_dtype>(0), [&] {
    const ir::Graph& g = graph_of(graph, "esg_graph_value_dtype");
    return static_cast<esg_dtype>(g.values[value_of(g, value, "esg_graph_value_dtype")].dtype);
  });
}

ESG_API size_t esg_graph_value_rank(const esg_graph* graph, int64_t value) {
  return read<size_t>(0, [&]() -> size_t {
    const ir::Graph& g = graph_of(graph, "esg_graph_value_rank");
    return g.values[value_of(g, value, "esg_graph_value_rank")].rank;
  });
}

ESG_API int64_t esg_graph_value_dim(const esg_graph* graph, int64_t value, size_t axis) {
  return read<int64_t>(0, [&]() -> int64_t {
    const ir::Graph& g = graph_of(graph, "esg_graph_value_dim");
    const ir::ValueId v = value_of(g, value, "esg_graph_value_dim");
    if (axis >= g.values[v].rank) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_graph_value_dim: axis " + std::to_string(axis) + " out of range");
    return g.dims[g.values[v].dims + axis];
  });
}

ESG_API const char* esg_graph_dim_symbol(const esg_graph* graph, int64_t dim) {
  return read<const char*>(nullptr, [&]() -> const char* {
    const ir::Graph& g = graph_of(graph, "esg_graph_dim_symbol");
    if (!ir::dim_is_symbolic(dim) || ir::dim_symbol(dim) >= g.symbols.size())
      throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_graph_dim_symbol: " + std::to_string(dim) + " is not a symbol of this graph");
    return g.symbols[ir::dim_symbol(dim)].c_str();
  });
}

ESG_API const char* esg_graph_node_op(const esg_graph* graph, int64_t node) {
  return read<const char*>(nullptr, [&] {
    const ir::Graph& g = graph_of(graph, "esg_graph_node_op");
    return node_of(g, node, "esg_graph_node_op").op->name;
  });
}

ESG_API size_t esg_graph_node_input_count(const esg_graph* graph, int64_t node) {
  return read<size_t>(0, [&]() -> size_t {
    const ir::Graph& g = graph_of(graph, "esg_graph_node_input_count");
    const ir::Node& n = node_of(g, node, "esg_graph_node_input_count");
    return n.num_inputs - n.num_captures;
  });
}

ESG_API int64_t esg_graph_node_input(const esg_graph* graph, int64_t node, size_t index) {
  return read<int64_t>(-1, [&]() -> int64_t {
    const ir::Graph& g = graph_of(graph, "esg_graph_node_input");
    const ir::Node& n = node_of(g, node, "esg_graph_node_input");
    if (index >= n.num_inputs - n.num_captures) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_graph_node_input: no input " + std::to_string(index));
    const ir::ValueId v = g.operands[n.first_input + index];
    return v == ir::kNone ? -1 : static_cast<int64_t>(v);
  });
}

ESG_API size_t esg_graph_node_output_count(const esg_graph* graph, int64_t node) {
  return read<size_t>(0, [&]() -> size_t {
    const ir::Graph& g = graph_of(graph, "esg_graph_node_output_count");
    return node_of(g, node, "esg_graph_node_output_count").num_outputs;
  });
}

ESG_API int64_t esg_graph_node_output(const esg_graph* graph, int64_t node, size_t index) {
  return read<int64_t>(-1, [&]() -> int64_t {
    const ir::Graph& g = graph_of(graph, "esg_graph_node_output");
    const ir::Node& n = node_of(g, node, "esg_graph_node_output");
    if (index >= n.num_outputs) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_graph_node_output: no output " + std::to_string(index));
    return n.first_output + index;
  });
}

ESG_API size_t esg_graph_node_body_count(const esg_graph* graph, int64_t node) {
  return read<size_t>(0, [&]() -> size_t {
    const ir::Graph& g = graph_of(graph, "esg_graph_node_body_count");
    return node_of(g, node, "esg_graph_node_body_count").num_bodies;
  });
}

ESG_API int64_t esg_graph_node_body(const esg_graph* graph, int64_t node, size_t index) {
  return read<int64_t>(-1, [&]() -> int64_t {
    const ir::Graph& g = graph_of(graph, "esg_graph_node_body");
    const ir::Node& n = node_of(g, node, "esg_graph_node_body");
    if (index >= n.num_bodies) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_graph_node_body: no body " + std::to_string(index));
    return g.bodies(n)[index];
  });
}

ESG_API const void* esg_graph_node_data(const esg_graph* graph, int64_t node, size_t* nbytes) {
  if (nbytes) *nbytes = 0;
  return read<const void*>(nullptr, [&]() -> const void* {
    const ir::Graph& g = graph_of(graph, "esg_graph_node_data");
    const ir::Node& n = node_of(g, node, "esg_graph_node_data");
    if (n.blob == ir::kNone) return nullptr;
    if (nbytes) *nbytes = g.blobs[n.blob]->size();
    return g.blobs[n.blob]->data();
  });
}

ESG_API size_t esg_graph_node_attr_count(const esg_graph* graph, int64_t node) {
  return read<size_t>(0, [&]() -> size_t {
    const ir::Graph& g = graph_of(graph, "esg_graph_node_attr_count");
    return node_of(g, node, "esg_graph_node_attr_count").op->attrs.size();
  });
}

ESG_API const char* esg_graph_node_attr_name(const esg_graph* graph, int64_t node, size_t attr) {
  return read<const char*>(nullptr, [&] {
    const ir::Graph& g = graph_of(graph, "esg_graph_node_attr_name");
    const ir::Node& n = node_of(g, node, "esg_graph_node_attr_name");
    attr_of(g, n, attr, "esg_graph_node_attr_name");
    return n.op->attrs[attr].name;
  });
}

ESG_API esg_attr_kind esg_graph_node_attr_kind(const esg_graph* graph, int64_t node, size_t attr) {
  return read<esg_attr_kind>(static_cast<esg_attr_kind>(0), [&] {
    const ir::Graph& g = graph_of(graph, "esg_graph_node_attr_kind");
    const ir::Node& n = node_of(g, node, "esg_graph_node_attr_kind");
    return static_cast<esg_attr_kind>(attr_of(g, n, attr, "esg_graph_node_attr_kind").kind);
  });
}

ESG_API int64_t esg_graph_node_attr_int(const esg_graph* graph, int64_t node, size_t attr) {
  return read<int64_t>(0, [&]() -> int64_t {
    const ir::Graph& g = graph_of(graph, "esg_graph_node_attr_int");
    const ir::AttrValue& a = attr_of(g, node_of(g, node, "esg_graph_node_attr_int"), attr, "esg_graph_node_attr_int");
    if (a.kind == ir::AttrKind::Float || a.kind == ir::AttrKind::String || a.kind == ir::AttrKind::IntList || a.kind == ir::AttrKind::FloatList)
      throw ir::Error(ir::ErrorCode::InvalidArgument, std::string("esg_graph_node_attr_int: the attribute is ") + ir::attr_kind_name(a.kind));
    return a.i;
  });
}

ESG_API double esg_graph_node_attr_float(const esg_graph* graph, int64_t node, size_t attr) {
  return read<double>(0.0, [&]() -> double {
    const ir::Graph& g = graph_of(graph, "esg_graph_node_attr_float");
    const ir::AttrValue& a = attr_of(g, node_of(g, node, "esg_graph_node_attr_float"), attr, "esg_graph_node_attr_float");
    if (a.kind != ir::AttrKind::Float)
      throw ir::Error(ir::ErrorCode::InvalidArgument, std::string("esg_graph_node_attr_float: the attribute is ") + ir::attr_kind_name(a.kind));
    return a.f;
  });
}

ESG_API const char* esg_graph_node_attr_string(const esg_graph* graph, int64_t node, size_t attr) {
  return read<const char*>(nullptr, [&]() -> const char* {
    const ir::Graph& g = graph_of(graph, "esg_graph_node_attr_string");
    const ir::Node& n = node_of(g, node, "esg_graph_node_attr_string");
    const ir::AttrValue& a = attr_of(g, n, attr, "esg_graph_node_attr_string");
    if (a.kind == ir::AttrKind::Enum) return n.op->attrs[attr].enum_values[a.i];
    if (a.kind == ir::AttrKind::String) return g.strings[a.offset].c_str();
    throw ir::Error(ir::ErrorCode::InvalidArgument, std::string("esg_graph_node_attr_string: the attribute is ") + ir::attr_kind_name(a.kind));
  });
}

ESG_API size_t esg_graph_node_attr_ints(const esg_graph* graph, int64_t node, size_t attr, const int64_t** values) {
  if (values) *values = nullptr;
  return read<size_t>(0, [&]() -> size_t {
    const ir::Graph& g = graph_of(graph, "esg_graph_node_attr_ints");
    const ir::AttrValue& a = attr_of(g, node_of(g, node, "esg_graph_node_attr_ints"), attr, "esg_graph_node_attr_ints");
    if (a.kind != ir::AttrKind::IntList)
      throw ir::Error(ir::ErrorCode::InvalidArgument, std::string("esg_graph_node_attr_ints: the attribute is ") + ir::attr_kind_name(a.kind));
    if (values) *values = g.ints.data() + a.offset;
    return a.size;
  });
}

ESG_API size_t esg_graph_node_attr_floats(const esg_graph* graph, int64_t node, size_t attr, const double** values) {
  if (values) *values = nullptr;
  return read<size_t>(0, [&]() -> size_t {
    const ir::Graph& g = graph_of(graph, "esg_graph_node_attr_floats");
    const ir::AttrValue& a = attr_of(g, node_of(g, node, "esg_graph_node_attr_floats"), attr, "esg_graph_node_attr_floats");
    if (a.kind != ir::AttrKind::FloatList)
      throw ir::Error(ir::ErrorCode::InvalidArgument, std::string("esg_graph_node_attr_floats: the attribute is ") + ir::attr_kind_name(a.kind));
    if (values) *values = g.floats.data() + a.offset;
    return a.size;
  });
}

}  // extern "C"
