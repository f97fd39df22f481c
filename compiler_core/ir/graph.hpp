// The graph: flat arrays of nodes and values, with regions for control-flow bodies.
//
// Everything lives in a handful of vectors (no per-node allocation): a node's inputs, attributes,
// body references and control dependencies are ranges of the graph's pools. Region 0 is the
// graph itself (its params are the graph inputs, its results the outputs); every other region
// is the body of a control-flow node and names its parent region.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/bytes.hpp"
#include "ir/dtype.hpp"
#include "ir/op_schema.hpp"
#include "ir/pool_allocator.hpp"
#include "ir/shape.hpp"

namespace esg::ir {

using ValueId = uint32_t;
using NodeId = uint32_t;
using RegionId = uint32_t;
using StrId = uint32_t;  // index into Graph::strings; 0 is the empty string
constexpr uint32_t kNone = UINT32_MAX;
// How deep bodies nest at most (the graph is depth 0, an if's branch in it 1). Real models nest a
// few levels; the limit keeps recursion over regions (verify, print, plan, run) shallow and a
// hostile file from making work that grows with depth squared.
constexpr size_t kMaxNesting = 64;

struct AttrValue {
  AttrKind kind;
  uint32_t size = 0;  // list length
  union {
    int64_t i;        // Int, Bool, DType, Enum
    double f;         // Float
    uint32_t offset;  // IntList/FloatList: into Graph::ints/floats; String: a StrId
  };
  AttrValue() : kind(AttrKind::Int), i(0) {}
};

// 24 bytes: the dimensions live in Graph::dims, so a value costs little more than its rank.
struct Value {
  NodeId producer = kNone;  // kNone for region params (graph inputs, body params, captures)
  uint32_t index = 0;       // which output of the producer
  RegionId region = 0;
  StrId name = 0;           // 0: derived from the producer when printed
  uint32_t dims = 0;        // offset of the shape in Graph::dims
  uint8_t rank = 0;
  DType dtype = DType::Invalid;
};

struct Node {
  const OpSchema* op = nullptr;
  RegionId region = 0;
  uint32_t first_input = 0, num_inputs = 0;  // Graph::operands; absent optional inputs are kNone
  uint32_t num_captures = 0;                 // trailing inputs captured by bodies
  ValueId first_output = 0;
  uint32_t num_outputs = 0;                  // outputs are consecutive values
  uint32_t first_attr = 0;                   // op->attrs.size() entries of Graph::attrs
  uint32_t first_body = 0, num_bodies = 0;   // Graph::body_refs
  uint32_t first_dep = 0, num_deps = 0;      // Graph::dep_refs: nodes that must run first
  uint32_t first_note = 0, num_notes = 0;    // Graph::notes: key, value string pairs
  StrId name = 0;                            // set name, 0: derived ("<op>_<id>")
  StrId scope = 0;                           // name scope path, 0: none
  uint32_t blob = kNone;                     // constants: index into Graph::blobs
};

struct Region {
  RegionId parent = kNone;
  NodeId owner = kNone;                  // the control-flow node, once attached
  std::vector<ValueId> params;           // graph inputs / body parameters
  std::vector<ValueId> captures_inner;   // body values standing for…
  std::vector<ValueId> captures_outer;   // …these values of the parent region
  std::vector<ValueId> results;          // graph outputs / body results
  std::vector<NodeId> nodes;             // in creation (topological) order
};

class Graph {
 public:
  explicit Graph(std::string name = "graph");

  std::string name;
  Pool<Node> nodes;
  Pool<Value> values;
  std::vector<Region> regions;
  Pool<Dim> dims;
  Pool<ValueId> operands;
  Pool<AttrValue> attrs;
  Pool<int64_t> ints;
  Pool<double> floats;
  Pool<RegionId> body_refs;
  Pool<NodeId> dep_refs;
  Pool<StrId> notes;
  std::vector<std::string> strings;
  std::vector<std::string> symbols;
  std::vector<Blob> blobs;  // constants' bytes

  Shape shape(ValueId v) const { return Shape::from(dims.data() + values[v].dims, values[v].rank); }
  void set_shape(ValueId v, const Shape& s) {
    values[v].dims = static_cast<uint32_t>(dims.size());
    values[v].rank = static_cast<uint8_t>(s.rank());
    dims.insert(dims.end(), s.begin(), s.end());
  }

  // Accessors of a node's pools.
  Span<ValueId> inputs(const Node& n) const { return {operands.data() + n.first_input, n.num_inputs}; }
  Span<AttrValue> node_attrs(const Node& n) const { return {attrs.data() + n.first_attr, n.op->attrs.size()}; }
  Span<RegionId> bodies(const Node& n) const { return {body_refs.data() + n.first_body, n.num_bodies}; }
  Span<NodeId> deps(const Node& n) const { return {dep_refs.data() + n.first_dep, n.num_deps}; }
  Span<int64_t> ints_of(const AttrValue& a) const { return {ints.data() + a.offset, a.size}; }
  Span<double> floats_of(const AttrValue& a) const { return {floats.data() + a.offset, a.size}; }
  const std::string& string_of(const AttrValue& a) const { return strings[a.offset]; }

  StrId intern(std::string_view s);
  uint32_t symbol(std::string_view name);  // interned
  std::string dim_str(Dim d) const;
  std::string shape_str(const Shape& s) const;  // "[B,128,512]"
  std::string type_str(ValueId v) const;        // "f32[B,128,512]"
  std::string value_name(ValueId v) const;      // set name, else "<node name>" or "<node name>:<i>"
  std::string node_name(NodeId n) const;        // scope/set name, else "<op>_<id>"

  // Graph-level inputs and outputs (region 0).
  const std::vector<ValueId>& inputs() const { return regions[0].params; }
  const std::vector<ValueId>& outputs() const { return regions[0].results; }

 private:
  std::unordered_map<std::string, StrId> string_index_;
  std::unordered_map<std::string, uint32_t> symbol_index_;
};

}  // namespace esg::ir
