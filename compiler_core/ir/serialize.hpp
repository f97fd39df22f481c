// Saving and loading graphs in the versioned binary format of docs/graph-format.md.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.hpp"

namespace esg::ir {

std::vector<uint8_t> serialize(const Graph& g);
// Throws ir::Error (ErrorCode::Format) on anything but a valid file; never reads out of bounds.
std::unique_ptr<Graph> deserialize(const void* data, size_t size);
void save(const Graph& g, const std::string& path);

// The record stream alone, for a file that holds several graphs over one table of constants
// (the compiled-model file, runtime/model_file.hpp).
//
// Constants' bytes are written once each, however many graphs share them (copies of a graph
// share their constants' bytes): the records name them by their index here.
class BlobTable {
 public:
  uint32_t add(const Bytes& bytes);
  const std::vector<const Bytes*>& blobs() const { return blobs_; }

 private:
  std::vector<const Bytes*> blobs_;
  std::unordered_map<const void*, uint32_t> index_;
};
struct GraphRecords {
  std::vector<uint8_t> bytes;
  std::vector<uint32_t> value_index;  // per value of the graph: its number in the stream (kNone: a body's capture)
  std::vector<uint32_t> node_index;   // per node: its number in the stream
};
GraphRecords serialize_records(const Graph& g, BlobTable& blobs);

// A constant's bytes: `shared` when set (graphs read from one file share them, in place or
// copied once), else copied from `data`.
struct ConstBlob {
  const uint8_t* data;
  uint64_t size;
  Blob shared;
};
struct LoadedGraph {
  std::unique_ptr<Graph> graph;
  std::vector<ValueId> values;  // per number in the stream: the value it is now
  std::vector<NodeId> nodes;    // per number in the stream: the node it is now
};
// A record stream whose constants are `blobs`; fails as deserialize does.
LoadedGraph deserialize_records(const uint8_t* data, size_t size, const std::vector<ConstBlob>& blobs);
std::unique_ptr<Graph> load(const std::string& path);

}  // namespace esg::ir
