// Graph.inspect(): every node with its op, operands, attributes, the bodies it owns and (for
// constants) its data as a numpy array; every value it mentions with name, dtype and shape
// (symbols as their names). Plain dicts and lists, so exporters and tools need nothing else.
#include "graph_inspect.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <functional>

#include "lift.hpp"

namespace py = pybind11;

namespace esgraph_py {
namespace {

py::object attr_value(const esg_graph* g, int64_t node, size_t k) {
  switch (esg_graph_node_attr_kind(g, node, k)) {
    case ESG_ATTR_INT: return py::int_(esg_graph_node_attr_int(g, node, k));
    case ESG_ATTR_BOOL: return py::bool_(esg_graph_node_attr_int(g, node, k) != 0);
    case ESG_ATTR_DTYPE: return py::cast(static_cast<esg::DType>(esg_graph_node_attr_int(g, node, k)));
    case ESG_ATTR_FLOAT: return py::float_(esg_graph_node_attr_float(g, node, k));
    case ESG_ATTR_ENUM:
    case ESG_ATTR_STRING: return py::str(esg_graph_node_attr_string(g, node, k));
    case ESG_ATTR_INT_LIST: {
      const int64_t* v = nullptr;
      const size_t n = esg_graph_node_attr_ints(g, node, k, &v);
      return py::cast(std::vector<int64_t>(v, v + n));
    }
    case ESG_ATTR_FLOAT_LIST: {
      const double* v = nullptr;
      const size_t n = esg_graph_node_attr_floats(g, node, k, &v);
      return py::cast(std::vector<double>(v, v + n));
    }
  }
  esg::detail::check(esg_last_status());
  return py::none();
}

py::tuple shape_of(const esg_graph* g, int64_t v) {
  const size_t rank = esg_graph_value_rank(g, v);
  py::tuple shape(rank);
  for (size_t a = 0; a < rank; ++a) {
    const int64_t d = esg_graph_value_dim(g, v, a);
    shape[a] = d >= 0 ? py::object(py::int_(d)) : py::object(py::str(esg_graph_dim_symbol(g, d)));
  }
  return shape;
}

}  // namespace

py::dict inspect_graph(const esg::Graph& graph) {
  const esg_graph* g = graph.handle();
  py::dict values;
  auto mention = [&](int64_t v) -> py::object {
    if (v < 0) return py::none();
    if (!values.contains(py::int_(v))) {
      py::dict info;
      info["name"] = esg_graph_value_name(g, v);
      info["dtype"] = static_cast<esg::DType>(esg_graph_value_dtype(g, v));
      info["shape"] = shape_of(g, v);
      values[py::int_(v)] = info;
    }
    return py::int_(v);
  };
  // A body: its parameters, captures (inner, outer) and results, and its nodes in order, each
  // with the bodies it owns.
  std::function<py::dict(int64_t)> body = [&](int64_t b) {
    py::list params, results, captures, nodes;
    for (size_t i = 0; i < esg_graph_body_param_count(g, b); ++i) params.append(mention(esg_graph_body_param(g, b, i)));
    for (size_t i = 0; i < esg_graph_body_capture_count(g, b); ++i) {
      int64_t outer = -1;
      const int64_t inner = esg_graph_body_capture(g, b, i, &outer);
      captures.append(py::make_tuple(mention(inner), mention(outer)));
    }
    for (size_t i = 0; i < esg_graph_body_node_count(g, b); ++i) {
      const int64_t n = esg_graph_body_node(g, b, i);
      py::dict node;
      node["op"] = esg_graph_node_op(g, n);
      py::list ins, outs, bodies;
      for (size_t k = 0; k < esg_graph_node_input_count(g, n); ++k) ins.append(mention(esg_graph_node_input(g, n, k)));
      for (size_t k = 0; k < esg_graph_node_output_count(g, n); ++k) outs.append(mention(esg_graph_node_output(g, n, k)));
      for (size_t k = 0; k < esg_graph_node_body_count(g, n); ++k) bodies.append(body(esg_graph_node_body(g, n, k)));
      node["inputs"] = ins;
      node["outputs"] = outs;
      node["bodies"] = bodies;
      py::dict attrs;
      for (size_t k = 0; k < esg_graph_node_attr_count(g, n); ++k) attrs[esg_graph_node_attr_name(g, n, k)] = attr_value(g, n, k);
      node["attrs"] = attrs;
      size_t nbytes = 0;
      if (const void* data = esg_graph_node_data(g, n, &nbytes)) {
        const int64_t v = esg_graph_node_output(g, n, 0);
        const esg::DType dtype = static_cast<esg::DType>(esg_graph_value_dtype(g, v));
        std::vector<py::ssize_t> dims;
        for (py::handle d : shape_of(g, v)) dims.push_back(d.cast<py::ssize_t>());
        // bf16 constants as their bit patterns in uint16, as the model's inputs and outputs.
        py::array a(dtype == esg::bf16 ? py::dtype("uint16") : numpy_dtype_of(dtype), dims);
        std::memcpy(a.mutable_data(), data, nbytes);
        node["data"] = a;
      }
      nodes.append(node);
    }
    for (size_t i = 0; i < esg_graph_body_result_count(g, b); ++i) results.append(mention(esg_graph_body_result(g, b, i)));
    py::dict out;
    out["params"] = params;
    out["captures"] = captures;
    out["results"] = results;
    out["nodes"] = nodes;
    return out;
  };
  py::dict top = body(0);
  py::dict out;
  out["name"] = esg_graph_name(g);
  out["inputs"] = top["params"];
  out["outputs"] = top["results"];
  out["nodes"] = top["nodes"];
  out["values"] = values;
  return out;
}

}  // namespace esgraph_py
