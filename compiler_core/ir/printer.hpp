// Human-readable renderings of a graph: a text listing and Graphviz DOT.
#pragma once
#include <string>

#include "ir/graph.hpp"

namespace esg::ir {

std::string to_text(const Graph& g);
std::string to_dot(const Graph& g);
std::string attr_str(const Graph& g, const AttrSchema& schema, const AttrValue& v);

}  // namespace esg::ir
