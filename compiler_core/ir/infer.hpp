// The context a shape inference rule runs in. A rule reads the node's inputs and attributes and
// sets its outputs' shapes (output dtypes are already set from the op's type variables, except
// for ops whose outputs take their types from a body). A rule that rejects its inputs calls
// fail(); the builder turns that into an error naming the op, the rule and the inputs.
#pragma once
#include <string>

#include "ir/error.hpp"
#include "ir/graph.hpp"

namespace esg::ir {

// What a shape beyond kMaxElements is told (builder and rules alike).
std::string beyond_element_limit(const Graph& g, const Shape& s);

// "a: f32[2,3], b: f32[4]": a node's inputs, for the message of a rule that failed.
std::string describe_inputs(const Graph& g, const OpSchema& op, Span<ValueId> inputs);

// Thrown by rules; carries only the rule's own explanation.
struct InferFailure {
  ErrorCode code;
  std::string detail;
};

class InferContext {
 public:
  InferContext(Graph& g, const OpSchema& op, NodeId node) : g_(g), op_(op), node_(node) {}

  const OpSchema& op() const { return op_; }
  const Graph& graph() const { return g_; }
  Graph& mutable_graph() { return g_; }

  // Declared inputs (captures excluded); absent optional inputs are kNone.
  size_t num_inputs() const;
  bool has_input(size_t i) const { return input_id(i) != kNone; }
  ValueId input_id(size_t i) const;
  const Value& input(size_t i) const { return g_.values[input_id(i)]; }
  Shape shape(size_t i) const { return g_.shape(input_id(i)); }

  size_t num_outputs() const { return node().num_outputs; }
  Value& output(size_t i) { return g_.values[node().first_output + i]; }
  // Every rule's output shape passes here: one beyond kMaxElements fails the op.
  void set_shape(size_t i, const Shape& s) {
    if (s.static_elements() < 0) fail_oversized(i, s);
    g_.set_shape(node().first_output + static_cast<ValueId>(i), s);
  }

  int64_t attr_int(const char* name) const;  // Int, Bool, DType and Enum attributes
  double attr_float(const char* name) const;
  bool attr_bool(const char* name) const { return attr_int(name) != 0; }
  Span<int64_t> attr_ints(const char* name) const;
  Span<RegionId> bodies() const { return g_.bodies(node()); }

  // Normalizes a possibly negative axis against `rank`, failing with the attribute's name.
  size_t axis(int64_t axis, size_t rank, const char* attr) const;
  // A symbolic dimension standing for an expression the core does not simplify.
  Dim derived_symbol(const std::string& expr) { return symbol_dim(g_.symbol(expr)); }
  // A size only running the op tells (OpSchema::sized_by_data): a symbol of this node's own,
  // "<node>.<what>", which no other node and no input shares.
  Dim data_symbol(const char* what) { return symbol_dim(g_.symbol(g_.node_name(node_) + "." + what)); }

  [[noreturn]] void fail(const std::string& detail) const { throw InferFailure{ErrorCode::Shape, detail}; }
  [[noreturn]] void fail_oversized(size_t output, const Shape& s) const;
  [[noreturn]] void fail_attr(const std::string& detail) const { throw InferFailure{ErrorCode::Attribute, detail}; }
  [[noreturn]] void fail_dtype(const std::string& detail) const { throw InferFailure{ErrorCode::DType, detail}; }

 private:
  const Node& node() const { return g_.nodes[node_]; }
  const AttrValue& attr(const char* name) const;

  Graph& g_;
  const OpSchema& op_;
  NodeId node_;
};

// Numpy broadcasting of two shapes; nullopt-like failure reported through ctx.
Shape broadcast_shapes(InferContext& ctx, const Shape& a, const Shape& b);

// The rules, one function each, named as in infer_rules.def.
#define ESG_INFER_RULE(name, version) void infer_##name(InferContext& ctx);
#include "ir/infer_rules.def"
#undef ESG_INFER_RULE

}  // namespace esg::ir
