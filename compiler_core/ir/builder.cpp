#include "ir/builder.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ir/error.hpp"
#include "ir/infer.hpp"

namespace esg::ir {
namespace {

// Why `s` cannot be a tensor's shape ("" when it can): more than kMaxElements elements.
std::string oversized(const Graph& g, const Shape& s) { return s.static_elements() >= 0 ? "" : beyond_element_limit(g, s); }

// Sizes of every pool a node touches; restoring them undoes a half-made node.
struct Checkpoint {
  size_t nodes, values, dims, operands, attrs, ints, floats, body_refs, dep_refs, notes;

  explicit Checkpoint(const Graph& g)
      : nodes(g.nodes.size()), values(g.values.size()), dims(g.dims.size()), operands(g.operands.size()),
        attrs(g.attrs.size()), ints(g.ints.size()), floats(g.floats.size()),
        body_refs(g.body_refs.size()), dep_refs(g.dep_refs.size()), notes(g.notes.size()) {}

  void restore(Graph& g) const {
    g.nodes.resize(nodes);
    g.values.resize(values);
    g.dims.resize(dims);
    g.operands.resize(operands);
    g.attrs.resize(attrs);
    g.ints.resize(ints);
    g.floats.resize(floats);
    g.body_refs.resize(body_refs);
    g.dep_refs.resize(dep_refs);
    g.notes.resize(notes);
  }
};

std::string dtype_list(uint32_t mask) {
  std::string out;
  for (int t = 1; t < kNumDTypes; ++t)
    if (mask & dtype_bit(static_cast<DType>(t))) {
      if (!out.empty()) out += ", ";
      out += dtype_name(static_cast<DType>(t));
    }
  return out;
}

std::string num_str(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

std::string describe_inputs(const Graph& g, const OpSchema& op, Span<ValueId> inputs) {
  std::string out;
  int variadic = op.variadic_input();
  size_t n_variadic = variadic < 0 ? 0 : inputs.size() - (op.inputs.size() - 1);
  size_t k = 0;
  for (size_t s = 0; s < op.inputs.size(); ++s) {
    size_t count = static_cast<int>(s) == variadic ? n_variadic : 1;
    for (size_t j = 0; j < count && k < inputs.size(); ++j, ++k) {
      if (inputs[k] == kNone) continue;
      if (!out.empty()) out += ", ";
      out += op.inputs[s].name;
      if (static_cast<int>(s) == variadic) out += "[" + std::to_string(j) + "]";
      out += ": " + g.type_str(inputs[k]);
    }
  }
  return out.empty() ? "none" : out;
}

Builder::Builder(std::string graph_name) : graph_(std::make_unique<Graph>(std::move(graph_name))) {}

void Builder::check_value(ValueId v) const {
  if (v >= graph_->values.size())
    throw Error(ErrorCode::InvalidArgument, "value " + std::to_string(v) + " does not exist");
}

ValueId Builder::use(ValueId v) {
  check_value(v);
  Graph& g = *graph_;
  RegionId home = g.values[v].region;
  RegionId here = current_region();
  if (home == here) return v;
  // The chain of open bodies from the value's region down to the current one.
  auto pos = std::find(region_stack_.begin(), region_stack_.end(), home);
  if (pos == region_stack_.end())
    throw Error(ErrorCode::Lifetime, "tensor " + g.value_name(v) +
                                         " belongs to a body that is already closed; return it "
                                         "from the body to use it outside");
  for (auto it = pos + 1; it != region_stack_.end(); ++it) {
    Region& r = g.regions[*it];
    auto found = std::find(r.captures_outer.begin(), r.captures_outer.end(), v);
    if (found != r.captures_outer.end()) {
      v = r.captures_inner[static_cast<size_t>(found - r.captures_outer.begin())];
      continue;
    }
    Value inner = g.values[v];
    inner.producer = kNone;
    inner.index = 0;
    inner.region = *it;
    inner.name = 0;
    ValueId id = static_cast<ValueId>(g.values.size());
    g.values.push_back(inner);
    r.captures_outer.push_back(v);
    r.captures_inner.push_back(id);
    v = id;
  }
  return v;
}

namespace {

Error op_error(const OpSchema& op, ErrorCode code, const std::string& what) { return Error(code, std::string(op.name) + ": " + what); }

}  // namespace

size_t Builder::check_inputs(const OpSchema& op, Span<ValueId> inputs, uint32_t (&bound)[8]) const {
  const Graph& g = *graph_;
  const int variadic = op.variadic_input();
  const size_t fixed = op.inputs.size() - (variadic >= 0 ? 1 : 0);
  if (variadic < 0 ? inputs.size() != op.inputs.size() : inputs.size() < fixed)
    throw op_error(op, ErrorCode::InvalidArgument, "takes " + std::to_string(op.inputs.size()) +
                                                       " input(s), got " + std::to_string(inputs.size()));
  const size_t n_variadic = variadic >= 0 ? inputs.size() - fixed : 0;
  size_t k = 0;
  for (size_t s = 0; s < op.inputs.size(); ++s) {
    const InputSchema& in = op.inputs[s];
    const size_t count = static_cast<int>(s) == variadic ? n_variadic : 1;
    if (in.variadic && count < in.min_count)
      throw op_error(op, ErrorCode::InvalidArgument, "input `" + std::string(in.name) + "` needs at least " +
                                                         std::to_string(in.min_count) + " tensor(s), got " +
                                                         std::to_string(count));
    for (size_t j = 0; j < count; ++j, ++k) {
      const ValueId v = inputs[k];
      if (v == kNone) {
        if (in.optional) continue;
        throw op_error(op, ErrorCode::InvalidArgument, "the required input `" + std::string(in.name) + "` is missing");
      }
      check_value(v);
      if (std::find(region_stack_.begin(), region_stack_.end(), g.values[v].region) == region_stack_.end())
        throw op_error(op, ErrorCode::Lifetime, "input `" + std::string(in.name) + "` (" + g.value_name(v) +
                                                    ") belongs to a body that is already closed");
      const DType t = g.values[v].dtype;
      if (in.type_var == InputSchema::kFixed) {
        if (t != in.fixed)
          throw op_error(op, ErrorCode::DType, "input `" + std::string(in.name) + "` must be " +
                                                   dtype_name(in.fixed) + ", got " + dtype_name(t));
      } else if (in.type_var >= 0) {
        const TypeVarSchema& tv = op.type_vars[static_cast<size_t>(in.type_var)];
        if (!(tv.allowed & dtype_bit(t)))
          throw op_error(op, ErrorCode::DType, "input `" + std::string(in.name) + "` has dtype " + dtype_name(t) +
                                                   ", but " + tv.name + " accepts only " + dtype_list(tv.allowed));
        uint32_t& b = bound[in.type_var];
        if (b == 0) {
          b = static_cast<uint32_t>(t);
        } else if (b != static_cast<uint32_t>(t)) {
          throw op_error(op, ErrorCode::DType, "inputs of type " + std::string(tv.name) + " must share one dtype, got " +
                                                   dtype_name(static_cast<DType>(b)) + " and " + dtype_name(t) +
                                                   " (inputs " + describe_inputs(g, op, inputs) + ")");
        }
      }
    }
  }
  return n_variadic;
}

void Builder::check_bodies(const OpSchema& op, Span<RegionId> bodies, RegionId region) const {
  const Graph& g = *graph_;
  if (bodies.size() != op.subgraphs.size())
    throw op_error(op, ErrorCode::InvalidArgument, "takes " + std::to_string(op.subgraphs.size()) +
                                                       " bodies, got " + std::to_string(bodies.size()));
  for (size_t i = 0; i < bodies.size(); ++i) {
    const RegionId r = bodies[i];
    if (r == 0 || r >= g.regions.size() || g.regions[r].parent != region || g.regions[r].owner != kNone ||
        std::find(region_stack_.begin(), region_stack_.end(), r) != region_stack_.end())
      throw op_error(op, ErrorCode::InvalidArgument, "body `" + std::string(op.subgraphs[i].name) +
                                                         "` is not a finished, unused body of this scope");
    if (std::find(bodies.begin(), bodies.begin() + static_cast<std::ptrdiff_t>(i), r) != bodies.begin() + static_cast<std::ptrdiff_t>(i))
      throw op_error(op, ErrorCode::InvalidArgument, "the same body is passed twice");
  }
}

void Builder::add_attrs(const OpSchema& op, Span<AttrArg> attrs) {
  Graph& g = *graph_;
  for (size_t i = 0; i < op.attrs.size(); ++i) {
    const AttrSchema& as = op.attrs[i];
    const AttrArg& arg = attrs[i];
    // Messages are built only on failure: this loop runs for every attribute of every node.
    auto where = [&] { return "attribute `" + std::string(as.name) + "`"; };
    if (arg.present && arg.kind != as.kind)
      throw op_error(op, ErrorCode::Attribute, where() + " takes " + attr_kind_name(as.kind) + ", got " + attr_kind_name(arg.kind));
    if (!arg.present && as.required) throw op_error(op, ErrorCode::Attribute, where() + " is required");
    AttrValue v;
    v.kind = as.kind;
    auto in_range = [&](double x) {
      if ((as.has_lo && x < as.lo) || (as.has_hi && x > as.hi))
        throw op_error(op, ErrorCode::Attribute, where() + " is " + num_str(x) + ", outside [" +
                                                     (as.has_lo ? num_str(as.lo) : "-inf") + ", " +
                                                     (as.has_hi ? num_str(as.hi) : "inf") + "]");
    };
    switch (as.kind) {
      case AttrKind::Int: v.i = arg.present ? arg.i : as.i; in_range(static_cast<double>(v.i)); break;
      case AttrKind::Bool: v.i = (arg.present ? arg.i : as.i) != 0; break;
      case AttrKind::Float:
        v.f = arg.present ? arg.f : as.f;
        if (std::isnan(v.f)) throw op_error(op, ErrorCode::Attribute, where() + " is NaN");
        in_range(v.f);
        break;
      case AttrKind::DType:
        v.i = arg.present ? arg.i : as.i;
        if (!dtype_valid(static_cast<DType>(v.i)))
          throw op_error(op, ErrorCode::Attribute, where() + " is not a dtype (code " + std::to_string(v.i) + ")");
        break;
      case AttrKind::Enum:
        v.i = arg.present ? arg.i : as.i;
        if (v.i < 0 || v.i >= static_cast<int64_t>(as.num_enum_values)) {
          std::string names;
          for (uint32_t e = 0; e < as.num_enum_values; ++e) names += (e ? ", " : "") + std::to_string(e) + "=" + as.enum_values[e];
          throw op_error(op, ErrorCode::Attribute, where() + " is " + std::to_string(v.i) + "; valid: " + names);
        }
        break;
      case AttrKind::String: v.offset = g.intern(arg.present && arg.s ? arg.s : (as.s ? as.s : "")); break;
      case AttrKind::IntList: {
        const int64_t* p = arg.present ? arg.ints : as.ints;
        v.size = static_cast<uint32_t>(arg.present ? arg.size : as.list_size);
        if (v.size && !p) throw op_error(op, ErrorCode::InvalidArgument, where() + " has a size but no data");
        v.offset = static_cast<uint32_t>(g.ints.size());
        for (uint32_t e = 0; e < v.size; ++e) in_range(static_cast<double>(p[e]));
        g.ints.insert(g.ints.end(), p, p + v.size);
        break;
      }
      case AttrKind::FloatList: {
        const double* p = arg.present ? arg.floats : as.floats;
        v.size = static_cast<uint32_t>(arg.present ? arg.size : as.list_size);
        if (v.size && !p) throw op_error(op, ErrorCode::InvalidArgument, where() + " has a size but no data");
        v.offset = static_cast<uint32_t>(g.floats.size());
        for (uint32_t e = 0; e < v.size; ++e) in_range(p[e]);
        g.floats.insert(g.floats.end(), p, p + v.size);
        break;
      }
    }
    g.attrs.push_back(v);
  }
}

size_t Builder::output_count(const OpSchema& op, uint32_t first_attr, size_t n_variadic, Span<RegionId> bodies) const {
  const Graph& g = *graph_;
  if (op.outputs.size() != 1 || op.outputs[0].count == OutputCount::One) return op.outputs.size();
  const OutputSchema& os = op.outputs[0];
  if (os.count == OutputCount::FromInput) return n_variadic;
  if (os.count == OutputCount::FromSubgraph) return g.regions[bodies[static_cast<size_t>(os.count_ref)]].results.size();
  const AttrValue& a = g.attrs[first_attr + static_cast<size_t>(os.count_ref)];
  if (a.kind == AttrKind::Int && a.i < 0)
    throw op_error(op, ErrorCode::Attribute, "output count `" + std::string(op.attrs[static_cast<size_t>(os.count_ref)].name) + "` is negative");
  return a.kind == AttrKind::Int ? static_cast<size_t>(a.i) : a.size;
}

void Builder::capture(NodeId id, Span<RegionId> bodies) {
  Graph& g = *graph_;
  for (uint32_t i = 0; i < g.nodes[id].num_inputs; ++i) {
    ValueId& v = g.operands[g.nodes[id].first_input + i];
    if (v != kNone) v = use(v);
  }
  std::vector<ValueId> captured;
  for (RegionId r : bodies)
    for (ValueId outer : g.regions[r].captures_outer)
      if (std::find(captured.begin(), captured.end(), outer) == captured.end()) captured.push_back(outer);
  if (!captured.empty()) {
    Node& n = g.nodes[id];
    // The node's inputs must stay contiguous; they are the last operands written so far
    // unless use() above appended nothing in between (it only appends values).
    g.operands.insert(g.operands.end(), captured.begin(), captured.end());
    n.num_inputs += static_cast<uint32_t>(captured.size());
    n.num_captures = static_cast<uint32_t>(captured.size());
  }
}

NodeId Builder::add_op(const OpSchema& op, Span<ValueId> inputs, Span<AttrArg> attrs,
                       Span<RegionId> bodies) {
  Graph& g = *graph_;
  const RegionId region = current_region();
  // Trailing optional inputs may be left out (a caller or a graph file from before they were
  // added); the node stores them as absent, so every node of an op has the same layout.
  ValueId padded[16];
  if (op.variadic_input() < 0 && inputs.size() < op.inputs.size() && op.inputs.size() <= 16) {
    bool omittable = true;
    for (size_t s = inputs.size(); s < op.inputs.size(); ++s) omittable = omittable && op.inputs[s].optional;
    if (omittable) {
      std::copy(inputs.begin(), inputs.end(), padded);
      std::fill(padded + inputs.size(), padded + op.inputs.size(), kNone);
      inputs = Span<ValueId>(padded, op.inputs.size());
    }
  }
  uint32_t bound[8] = {};  // DType per type variable, as codes
  const size_t n_variadic = check_inputs(op, inputs, bound);
  check_bodies(op, bodies, region);
  if (attrs.size() != op.attrs.size())
    throw op_error(op, ErrorCode::Attribute, "takes " + std::to_string(op.attrs.size()) + " attribute(s), got " + std::to_string(attrs.size()));
  const Checkpoint cp(g);
  try {
    const NodeId id = static_cast<NodeId>(g.nodes.size());
    Node node;
    node.op = &op;
    node.region = region;
    node.first_attr = static_cast<uint32_t>(g.attrs.size());
    add_attrs(op, attrs);
    // The node's operands, outputs (dtypes from the bound type variables, the op's fixed type
    // or an attribute; a body's or a constant's set later), bodies, control deps and notes.
    const size_t n_out = output_count(op, node.first_attr, n_variadic, bodies);
    node.first_input = static_cast<uint32_t>(g.operands.size());
    node.num_inputs = static_cast<uint32_t>(inputs.size());
    g.operands.insert(g.operands.end(), inputs.begin(), inputs.end());
    node.first_output = static_cast<ValueId>(g.values.size());
    node.num_outputs = static_cast<uint32_t>(n_out);
    for (size_t i = 0; i < n_out; ++i) {
      const OutputSchema& os = op.outputs[std::min(i, op.outputs.size() - 1)];
      Value v;
      v.producer = id;
      v.index = static_cast<uint32_t>(i);
      v.region = region;
      switch (os.type) {
        case OutputType::TypeVar: v.dtype = static_cast<DType>(bound[os.type_var]); break;
        case OutputType::Fixed: v.dtype = os.fixed; break;
        case OutputType::FromAttr: v.dtype = static_cast<DType>(g.attrs[node.first_attr + static_cast<size_t>(os.ref)].i); break;
        case OutputType::FromSubgraph:  // set by the rule
        case OutputType::Data: break;   // set by the caller (constants)
      }
      g.values.push_back(v);
    }
    node.first_body = static_cast<uint32_t>(g.body_refs.size());
    node.num_bodies = static_cast<uint32_t>(bodies.size());
    g.body_refs.insert(g.body_refs.end(), bodies.begin(), bodies.end());
    node.first_dep = static_cast<uint32_t>(g.dep_refs.size());
    for (NodeId d : deps_flat_)
      if (g.nodes[d].region == region) g.dep_refs.push_back(d);
    node.num_deps = static_cast<uint32_t>(g.dep_refs.size() - node.first_dep);
    node.first_note = static_cast<uint32_t>(g.notes.size());
    for (const Note& n : notes_) g.notes.insert(g.notes.end(), {n.key, n.value});
    node.num_notes = static_cast<uint32_t>(notes_.size());
    node.scope = name_scopes_.empty() ? 0 : name_scopes_.back();
    g.nodes.push_back(node);

    InferContext ctx(g, op, id);
    try {
      op.infer(ctx);  // (its set_shape refuses oversized outputs)
    } catch (const InferFailure& f) {
      throw Error(f.code, std::string(op.name) + ": " + f.detail + " (rule `" + op.infer_name +
                              "`; inputs " + describe_inputs(g, op, inputs) + ")");
    }
    // Commit: inputs of enclosing regions captured, then the bodies' captures.
    capture(id, bodies);
    for (RegionId r : bodies) g.regions[r].owner = id;
    g.regions[region].nodes.push_back(id);
    return id;
  } catch (...) {
    cp.restore(g);
    throw;
  }
}

ValueId Builder::add_input(std::string_view name, DType dtype, const Shape& shape) {
  if (region_stack_.size() != 1)
    throw Error(ErrorCode::InvalidArgument, "graph inputs cannot be added inside a body; use the body's parameters");
  if (!dtype_valid(dtype)) throw Error(ErrorCode::DType, "input `" + std::string(name) + "`: invalid dtype");
  for (Dim d : shape)
    if (dim_is_symbolic(d) && dim_symbol(d) >= graph_->symbols.size())
      throw Error(ErrorCode::Shape, "input `" + std::string(name) + "`: dimension " + std::to_string(d) +
                                        " is neither a size (>= 0) nor a symbol of this builder");
  if (const std::string why = oversized(*graph_, shape); !why.empty())
    throw Error(ErrorCode::Shape, "input `" + std::string(name) + "`: " + why);
  Graph& g = *graph_;
  Value v;
  v.dtype = dtype;
  v.name = name.empty() ? 0 : g.intern(name);
  const ValueId id = static_cast<ValueId>(g.values.size());
  g.values.push_back(v);
  g.set_shape(id, shape);
  g.regions[0].params.push_back(id);
  return id;
}

void Builder::check_constant(DType dtype, const Shape& shape, size_t nbytes) const {
  if (!dtype_valid(dtype)) throw Error(ErrorCode::DType, "constant: invalid dtype");
  if (!shape.is_static()) throw Error(ErrorCode::Shape, "constant: the shape must be static");
  for (Dim d : shape)
    if (d < 0) throw Error(ErrorCode::Shape, "constant: negative dimension");
  if (const std::string why = oversized(*graph_, shape); !why.empty()) throw Error(ErrorCode::Shape, "constant: " + why);
  const size_t expected = static_cast<size_t>(shape.num_elements()) * dtype_size(dtype);
  if (nbytes != expected)
    throw Error(ErrorCode::InvalidArgument, "constant: " + std::string(dtype_name(dtype)) + graph_->shape_str(shape) +
                                                " needs " + std::to_string(expected) + " bytes, got " + std::to_string(nbytes));
}

// A matrix whose rows lie a multiple of 4 KiB
// apart starts 16 bytes past one: kernels that read such weights in place row after row (oneDNN
// 2.6's gemm packing B at every call) map each row's line to the same L1 set, and on a Zen 3
// 128 x 1024 x 1024 took 5.1-6.1 ms from a line against 2.3 ms 16 bytes past it (128 x 768 x
// 4096: 10.2-11.2 against 5.1-7.0; bench/RESULTS.md). Other constants start on a line. The
// ONNX importer's weights, read in place, follow the same rule (onnx/_weights.py).
size_t constant_line_offset(DType dtype, const Shape& shape) {
  if (shape.rank() < 2 || dim_is_symbolic(shape[shape.rank() - 1])) return 0;
  const int64_t row_bytes = shape[shape.rank() - 1] * static_cast<int64_t>(dtype_size(dtype));
  return row_bytes > 0 && row_bytes % 4096 == 0 ? 16 : 0;
}

ValueId Builder::add_constant(DType dtype, const Shape& shape, const void* data, size_t nbytes) {
  if (nbytes && !data) throw Error(ErrorCode::InvalidArgument, "constant: data is NULL");
  check_constant(dtype, shape, nbytes);  // before the copy: a wrong size (SIZE_MAX) is the caller's error, not ours
  return add_constant(dtype, shape, copy_to_blob(static_cast<const uint8_t*>(data), nbytes, constant_line_offset(dtype, shape)));
}

ValueId Builder::add_constant(DType dtype, const Shape& shape, Blob bytes) {
  if (!bytes) throw Error(ErrorCode::InvalidArgument, "constant: no bytes");
  check_constant(dtype, shape, bytes->size());
  Graph& g = *graph_;
  g.blobs.push_back(std::move(bytes));
  try {
    const NodeId id = add_op(constant_op(), {}, {});
    g.nodes[id].blob = static_cast<uint32_t>(g.blobs.size() - 1);
    const ValueId out = g.nodes[id].first_output;
    g.values[out].dtype = dtype;
    g.set_shape(out, shape);
    return out;
  } catch (...) {
    g.blobs.pop_back();
    throw;
  }
}

void Builder::push_name_scope(std::string_view scope) {
  if (scope.empty()) throw Error(ErrorCode::InvalidArgument, "a name scope cannot be empty");
  std::string path = name_scopes_.empty() ? std::string(scope)
                                          : graph_->strings[name_scopes_.back()] + "/" + std::string(scope);
  name_scopes_.push_back(graph_->intern(path));
}

void Builder::pop_name_scope() {
  if (name_scopes_.empty()) throw Error(ErrorCode::InvalidArgument, "no name scope to pop");
  name_scopes_.pop_back();
}

void Builder::push_annotation(std::string_view key, std::string_view value) {
  if (key.empty()) throw Error(ErrorCode::InvalidArgument, "an annotation key cannot be empty");
  notes_.push_back({graph_->intern(key), graph_->intern(value)});
}

void Builder::pop_annotation() {
  if (notes_.empty()) throw Error(ErrorCode::InvalidArgument, "no annotation to pop");
  notes_.pop_back();
}

void Builder::push_control_deps(Span<ValueId> deps) {
  std::vector<NodeId> nodes;
  for (ValueId v : deps) {
    check_value(v);
    const NodeId p = graph_->values[v].producer;
    if (p == kNone) continue;  // inputs and parameters are ready before anything runs
    nodes.push_back(p);
  }
  dep_scopes_.push_back(nodes);
  deps_flat_.insert(deps_flat_.end(), nodes.begin(), nodes.end());
}

void Builder::pop_control_deps() {
  if (dep_scopes_.empty()) throw Error(ErrorCode::InvalidArgument, "no control-dependency scope to pop");
  deps_flat_.resize(deps_flat_.size() - dep_scopes_.back().size());
  dep_scopes_.pop_back();
}


RegionId Builder::begin_region(Span<ValueId> params_like) {
  std::vector<ParamType> types;
  for (ValueId v : params_like) {
    check_value(v);
    types.push_back({graph_->values[v].dtype, graph_->shape(v)});
  }
  return begin_region(types);
}

RegionId Builder::begin_region(const std::vector<ParamType>& params) {
  if (region_stack_.size() > kMaxNesting)
    throw Error(ErrorCode::Limit, "bodies nest at most " + std::to_string(kMaxNesting) + " deep; this one would be " +
                                      std::to_string(region_stack_.size()) + " deep");
  Graph& g = *graph_;
  const RegionId id = static_cast<RegionId>(g.regions.size());
  region_marks_.push_back(g.values.size());
  region_marks_.push_back(g.nodes.size());
  region_begins_.resize(id);
  region_begins_.push_back({g.values.size(), g.nodes.size()});
  Region r;
  r.parent = current_region();
  for (const ParamType& t : params) {
    if (!dtype_valid(t.dtype)) throw Error(ErrorCode::DType, "a body parameter has an invalid dtype");
    if (const std::string why = oversized(g, t.shape); !why.empty()) throw Error(ErrorCode::Shape, "a body parameter: " + why);
    Value p;
    p.dtype = t.dtype;
    p.region = id;
    r.params.push_back(static_cast<ValueId>(g.values.size()));
    g.values.push_back(p);
    g.set_shape(r.params.back(), t.shape);
  }
  g.regions.push_back(std::move(r));
  region_stack_.push_back(id);
  return id;
}

void Builder::cancel_region() {
  if (region_stack_.size() == 1) throw Error(ErrorCode::InvalidArgument, "no body is open");
  const RegionId id = current_region();
  const size_t nodes = region_marks_.back();
  region_marks_.pop_back();
  const size_t values = region_marks_.back();
  region_marks_.pop_back();
  region_stack_.pop_back();
  roll_back(values, nodes, id);
}

void Builder::discard_regions(RegionId first) {
  Graph& g = *graph_;
  if (first == 0 || first >= g.regions.size() || first >= region_begins_.size())
    throw Error(ErrorCode::InvalidArgument, "no body " + std::to_string(first) + " to discard");
  const auto [values, nodes] = region_begins_[first];
  // The bodies from `first` on must be ended and given to no op made before them (bodies nested
  // in them belong to ops that go with them); nothing else may have been made since `first`
  // began but the captures that bodies made in the regions still open.
  for (RegionId r = first; r < g.regions.size(); ++r)
    if ((g.regions[r].owner != kNone && g.regions[r].owner < nodes) ||
        std::find(region_stack_.begin(), region_stack_.end(), r) != region_stack_.end())
      throw Error(ErrorCode::InvalidArgument, "body " + std::to_string(r) + " is open or given to an op; only ended, unused bodies can be discarded");
  auto captured_in_open = [&](ValueId v) {
    for (RegionId open : region_stack_) {
      const auto& inner = g.regions[open].captures_inner;
      if (std::find(inner.begin(), inner.end(), v) != inner.end()) return true;
    }
    return false;
  };
  for (size_t n = nodes; n < g.nodes.size(); ++n)
    if (g.nodes[n].region < first)
      throw Error(ErrorCode::InvalidArgument, "nodes were made outside the bodies since body " + std::to_string(first) + " began");
  for (size_t v = values; v < g.values.size(); ++v)
    if (g.values[v].region < first && !captured_in_open(static_cast<ValueId>(v)))
      throw Error(ErrorCode::InvalidArgument, "values were made outside the bodies since body " + std::to_string(first) + " began");
  roll_back(values, nodes, first);
}

void Builder::roll_back(size_t values, size_t nodes, RegionId first_region) {
  Graph& g = *graph_;
  // Bodies begun since were all ended or cancelled, and made nothing outside them except
  // captures in the bodies still open: drop those, then the tail.
  for (RegionId open : region_stack_) {
    Region& r = g.regions[open];
    while (!r.captures_inner.empty() && r.captures_inner.back() >= values) {
      r.captures_inner.pop_back();
      r.captures_outer.pop_back();
    }
  }
  const Node* first = nodes < g.nodes.size() ? &g.nodes[nodes] : nullptr;
  if (first) {
    g.operands.resize(first->first_input);
    g.attrs.resize(first->first_attr);
    g.body_refs.resize(first->first_body);
    g.dep_refs.resize(first->first_dep);
    g.notes.resize(first->first_note);
  }
  g.nodes.resize(nodes);
  g.values.resize(values);
  g.regions.resize(first_region);
  region_begins_.resize(first_region);
}

Span<ValueId> Builder::region_params() const {
  if (region_stack_.size() == 1) return {};
  return graph_->regions[current_region()].params;
}

RegionId Builder::end_region(Span<ValueId> results) {
  if (region_stack_.size() == 1) throw Error(ErrorCode::InvalidArgument, "no body is open");
  if (results.empty()) throw Error(ErrorCode::InvalidArgument, "a body must return at least one tensor");
  std::vector<ValueId> mapped;
  for (ValueId v : results) mapped.push_back(use(v));
  const RegionId id = current_region();
  graph_->regions[id].results = std::move(mapped);
  region_stack_.pop_back();
  region_marks_.resize(region_marks_.size() - 2);
  return id;
}

std::unique_ptr<Graph> Builder::finish(Span<ValueId> outputs) {
  if (region_stack_.size() != 1)
    throw Error(ErrorCode::InvalidArgument, "a body is still open; end it before building the graph");
  for (RegionId r = 1; r < graph_->regions.size(); ++r)
    if (graph_->regions[r].owner == kNone)
      throw Error(ErrorCode::InvalidArgument, "a body was ended but never given to a control-flow op");
  for (ValueId v : outputs) {
    check_value(v);
    if (graph_->values[v].region != 0)
      throw Error(ErrorCode::Lifetime, "output " + graph_->value_name(v) + " belongs to a body, not to the graph");
  }
  graph_->regions[0].results.assign(outputs.begin(), outputs.end());
  auto done = std::move(graph_);
  graph_ = std::make_unique<Graph>(done->name);
  region_marks_.clear();
  region_begins_.assign(1, {0, 0});
  name_scopes_.clear();
  notes_.clear();
  dep_scopes_.clear();
  deps_flat_.clear();
  return done;
}

}  // namespace esg::ir
