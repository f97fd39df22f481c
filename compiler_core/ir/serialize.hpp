// Saving and loading graphs in the versioned binary format of docs/graph-format.md.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.hpp"

namespace esg::ir {

std::vector<uint8_t> serialize(const Graph& g);
// Throws ir::Error (ErrorCode::Format) on anything but a valid file; never reads out of bounds.
std::unique_ptr<Graph> deserialize(const void* data, size_t size);
void save(const Graph& g, const std::string& path);
std::unique_ptr<Graph> load(const std::string& path);

}  // namespace esg::ir
