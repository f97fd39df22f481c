// Builds a Graph node by node, checking each node as it is added: input counts, dtypes against
// the op's type variables, attribute kinds and ranges, then the op's shape inference rule. A
// node that fails leaves the graph exactly as it was.
//
// The builder also holds the scopes (names, annotations, control dependencies) and the stack of
// control-flow bodies being built; values of enclosing regions used inside a body are captured.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.hpp"

namespace esg::ir {

// An attribute as given by a caller: a view, copied into the graph by add_op.
struct AttrArg {
  AttrKind kind = AttrKind::Int;
  bool present = false;  // false: the schema default
  int64_t i = 0;
  double f = 0;
  const char* s = nullptr;
  const int64_t* ints = nullptr;
  const double* floats = nullptr;
  size_t size = 0;

  static AttrArg of_int(int64_t v) { AttrArg a; a.kind = AttrKind::Int; a.present = true; a.i = v; return a; }
  static AttrArg of_float(double v) { AttrArg a; a.kind = AttrKind::Float; a.present = true; a.f = v; return a; }
  static AttrArg of_bool(bool v) { AttrArg a; a.kind = AttrKind::Bool; a.present = true; a.i = v; return a; }
  static AttrArg of_dtype(DType v) { AttrArg a; a.kind = AttrKind::DType; a.present = true; a.i = static_cast<int64_t>(v); return a; }
  static AttrArg of_enum(int64_t v) { AttrArg a; a.kind = AttrKind::Enum; a.present = true; a.i = v; return a; }
  static AttrArg of_string(const char* v) { AttrArg a; a.kind = AttrKind::String; a.present = true; a.s = v; return a; }
  static AttrArg of_ints(const int64_t* v, size_t n) { AttrArg a; a.kind = AttrKind::IntList; a.present = true; a.ints = v; a.size = n; return a; }
  static AttrArg of_floats(const double* v, size_t n) { AttrArg a; a.kind = AttrKind::FloatList; a.present = true; a.floats = v; a.size = n; return a; }
};

// How far past a cache line a constant of this dtype and shape belongs (builder.cpp says why):
// where the builder copies it, and where a compiled-model file places it.
size_t constant_line_offset(DType dtype, const Shape& shape);

class Builder {
 public:
  explicit Builder(std::string graph_name = "graph");

  Graph& graph() { return *graph_; }
  const Graph& graph() const { return *graph_; }

  // Adds a node. `inputs` follow the schema's order, the variadic input expanded in place and
  // absent optional inputs as kNone; `attrs` follow the schema's attribute order. Returns the
  // node; throws ir::Error (the graph unchanged) when the node is not valid.
  NodeId add_op(const OpSchema& op, Span<ValueId> inputs, Span<AttrArg> attrs,
                Span<RegionId> bodies = {});

  ValueId add_input(std::string_view name, DType dtype, const Shape& shape);
  ValueId add_constant(DType dtype, const Shape& shape, const void* data, size_t nbytes);
  // The same over bytes another graph already holds (shared, not copied).
  ValueId add_constant(DType dtype, const Shape& shape, Blob bytes);

  // Scopes.
  void push_name_scope(std::string_view scope);
  void pop_name_scope();
  void push_annotation(std::string_view key, std::string_view value);
  void pop_annotation();
  void push_control_deps(Span<ValueId> deps);
  void pop_control_deps();

  // Bodies of control-flow ops.
  struct ParamType {
    DType dtype;
    Shape shape;
  };
  RegionId begin_region(Span<ValueId> params_like);
  RegionId begin_region(const std::vector<ParamType>& params);
  Span<ValueId> region_params() const;
  RegionId end_region(Span<ValueId> results);
  // Abandons the innermost body and everything made in it (e.g. when its callable threw).
  void cancel_region();
  // Abandons the bodies from `first` on, ended but given to no op (their op's call failed, or a
  // later body's callable threw), and everything made since `first` began.
  void discard_regions(RegionId first);
  RegionId current_region() const { return region_stack_.back(); }

  // Makes `v` usable in the current region, capturing it into every body between its region
  // and the current one. Throws if `v` belongs to a region not enclosing the current one.
  ValueId use(ValueId v);

  // Hands out the finished graph (outputs set, invariants checked) and starts a new one.
  std::unique_ptr<Graph> finish(Span<ValueId> outputs);

 private:
  // A constant's dtype, shape and size checked, before any byte is copied.
  void check_constant(DType dtype, const Shape& shape, size_t nbytes) const;
  struct Note { StrId key, value; };
  void check_value(ValueId v) const;
  // add_op's steps, each refusing what the op's schema does not allow, naming the op. The
  // inputs' count, presence, visibility and dtypes (binding each type variable's dtype in
  // `bound`); returns how many the variadic input got.
  size_t check_inputs(const OpSchema& op, Span<ValueId> inputs, uint32_t (&bound)[8]) const;
  // Each body a finished, unused body of `region`, passed once.
  void check_bodies(const OpSchema& op, Span<RegionId> bodies, RegionId region) const;
  // The attributes, defaults filled and ranges checked, appended to the graph's.
  void add_attrs(const OpSchema& op, Span<AttrArg> attrs);
  // How many outputs the node gets: the op's, or as many as its variadic input, a body's
  // results or an attribute (whose values start at `first_attr`) say.
  size_t output_count(const OpSchema& op, uint32_t first_attr, size_t n_variadic, Span<RegionId> bodies) const;
  // The node's inputs from enclosing regions captured, then its bodies' captures as inputs.
  void capture(NodeId id, Span<RegionId> bodies);

  std::unique_ptr<Graph> graph_;
  std::vector<RegionId> region_stack_{0};
  std::vector<size_t> region_marks_;  // values.size() and nodes.size() when each open body began
  // values.size() and nodes.size() when each body began, by RegionId (0: the graph), for discard_regions.
  std::vector<std::pair<size_t, size_t>> region_begins_{{0, 0}};
  // Drops everything made since the pools held `values` values and `nodes` nodes, and the
  // regions from `first_region` on.
  void roll_back(size_t values, size_t nodes, RegionId first_region);
  std::vector<StrId> name_scopes_;  // full paths
  std::vector<Note> notes_;
  std::vector<std::vector<NodeId>> dep_scopes_;
  std::vector<NodeId> deps_flat_;   // union of dep_scopes_, in order
};

}  // namespace esg::ir
