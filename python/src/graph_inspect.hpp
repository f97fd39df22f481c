// Graph.inspect(): a finished graph as plain Python data, read through the C inspection API.
#pragma once
#include <pybind11/pybind11.h>

#include <esgraph/esgraph.hpp>

namespace esgraph_py {

pybind11::dict inspect_graph(const esg::Graph& graph);

}  // namespace esgraph_py
