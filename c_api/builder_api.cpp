// C entry points of builders and tensors.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "c_api/handles.hpp"
#include "ir/graph.hpp"
#include "ir/half.hpp"

using esg::capi::guarded;
using esg::capi::make_tensor;
using esg::capi::resolve;
namespace ir = esg::ir;

namespace {

esg_tensor invalid() { return esg_tensor{nullptr, 0, 0}; }

std::vector<ir::ValueId> resolve_all(const esg_tensor* ts, size_t n, esg_builder* b, const char* what) {
  if (n && !ts) throw ir::Error(ir::ErrorCode::InvalidArgument, std::string(what) + ": a count but no array");
  std::vector<ir::ValueId> out;
  for (size_t i = 0; i < n; ++i) out.push_back(resolve(ts[i], b, std::string(what) + "[" + std::to_string(i) + "]"));
  return out;
}

void need_builder(const esg_builder* b, const char* fn) {
  if (!b) throw ir::Error(ir::ErrorCode::InvalidArgument, std::string(fn) + ": the builder is NULL");
  if (!esg::capi::builder_alive(b)) throw ir::Error(ir::ErrorCode::Lifetime, std::string(fn) + ": the builder was destroyed");
}

ir::Shape shape_of(const int64_t* dims, size_t rank, const char* fn) {
  if (rank && !dims) throw ir::Error(ir::ErrorCode::InvalidArgument, std::string(fn) + ": dims is NULL");
  return ir::Shape::from(dims, rank);
}

// Converts a double to `t`'s bytes (saturating nothing: the caller chose the value).
void scalar_bytes(ir::DType t, double v, unsigned char* out) {
  switch (t) {
    case ir::DType::F32: { float f = static_cast<float>(v); std::memcpy(out, &f, 4); break; }
    case ir::DType::F64: std::memcpy(out, &v, 8); break;
    case ir::DType::F16: { const uint16_t h = ir::float_to_f16(static_cast<float>(v)); std::memcpy(out, &h, 2); break; }
    case ir::DType::BF16: { const uint16_t h = ir::float_to_bf16(static_cast<float>(v)); std::memcpy(out, &h, 2); break; }
    case ir::DType::I8: { int8_t x = static_cast<int8_t>(v); std::memcpy(out, &x, 1); break; }
    case ir::DType::I16: { int16_t x = static_cast<int16_t>(v); std::memcpy(out, &x, 2); break; }
    case ir::DType::I32: { int32_t x = static_cast<int32_t>(v); std::memcpy(out, &x, 4); break; }
    case ir::DType::I64: { int64_t x = static_cast<int64_t>(v); std::memcpy(out, &x, 8); break; }
    case ir::DType::U8: { uint8_t x = static_cast<uint8_t>(v); std::memcpy(out, &x, 1); break; }
    case ir::DType::U16: { uint16_t x = static_cast<uint16_t>(v); std::memcpy(out, &x, 2); break; }
    case ir::DType::U32: { uint32_t x = static_cast<uint32_t>(v); std::memcpy(out, &x, 4); break; }
    case ir::DType::U64: { uint64_t x = static_cast<uint64_t>(v); std::memcpy(out, &x, 8); break; }
    case ir::DType::Bool: out[0] = v != 0; break;
    case ir::DType::Invalid: break;
  }
}

}  // namespace

extern "C" {

ESG_API const char* esg_version(void) { return ESG_VERSION_STRING; }

ESG_API const char* esg_dtype_name(esg_dtype dtype) { return ir::dtype_name(static_cast<ir::DType>(dtype)); }
ESG_API size_t esg_dtype_size(esg_dtype dtype) { return ir::dtype_size(static_cast<ir::DType>(dtype)); }

ESG_API esg_builder* esg_builder_create(const char* graph_name) {
  esg_builder* b = nullptr;
  guarded(nullptr, [&] {
    auto made = std::make_unique<esg_builder>(graph_name && *graph_name ? graph_name : "graph");
    esg::capi::register_builder(made.get());  // before it is handed out: never a builder that is not alive
    b = made.release();
  });
  return b;
}

ESG_API void esg_builder_destroy(esg_builder* builder) {
  if (!builder) return;
  esg::capi::unregister_builder(builder);
  delete builder;
}

ESG_API esg_status esg_builder_status(const esg_builder* builder) {
  return builder ? builder->first_status : ESG_ERR_INVALID_ARGUMENT;
}

ESG_API const char* esg_builder_error(const esg_builder* builder) {
  return builder ? builder->first_error.c_str() : "the builder is NULL";
}

ESG_API void esg_builder_clear_error(esg_builder* builder) {
  if (!builder) return;
  builder->first_status = ESG_OK;
  builder->first_error.clear();
}

ESG_API void esg_builder_set_sticky_errors(esg_builder* builder, bool sticky) {
  if (builder) builder->sticky_errors = sticky;
}

ESG_API int64_t esg_symbol(esg_builder* builder, const char* name) {
  int64_t d = 0;
  guarded(builder, [&] {
    need_builder(builder, "esg_symbol");
    if (!name || !*name) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_symbol: the name is empty");
    d = ir::symbol_dim(builder->core.graph().symbol(name));
  });
  return d;
}

ESG_API esg_tensor esg_input(esg_builder* builder, const char* name, esg_dtype dtype, const int64_t* dims, size_t rank) {
  esg_tensor t = invalid();
  guarded(builder, [&] {
    need_builder(builder, "esg_input");
    // Inputs are fed by name (Python's run({name: array}), ONNX, the command line): each needs one of its own.
    if (!name || !*name) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_input: an input needs a name");
    const ir::Graph& g = builder->core.graph();
    for (ir::ValueId v : g.inputs())
      if (g.value_name(v) == name)
        throw ir::Error(ir::ErrorCode::InvalidArgument, std::string("esg_input: the graph has an input named `") + name + "` already");
    t = make_tensor(builder, builder->core.add_input(name, static_cast<ir::DType>(dtype), shape_of(dims, rank, "esg_input")));
  });
  return t;
}

ESG_API esg_tensor esg_constant(esg_builder* builder, esg_dtype dtype, const int64_t* dims, size_t rank, const void* data, size_t nbytes) {
  esg_tensor t = invalid();
  guarded(builder, [&] {
    need_builder(builder, "esg_constant");
    t = make_tensor(builder, builder->core.add_constant(static_cast<ir::DType>(dtype), shape_of(dims, rank, "esg_constant"), data, nbytes));
  });
  return t;
}

ESG_API esg_tensor esg_constant_in_place(esg_builder* builder, esg_dtype dtype, const int64_t* dims, size_t rank, const void* data,
                                         size_t nbytes, void (*release)(void*), void* context) {
  // The owner exists before anything can fail, so that release runs exactly once on every path.
  std::shared_ptr<const void> owner;
  if (release) owner = std::shared_ptr<void>(context, release);
  esg_tensor t = invalid();
  guarded(builder, [&] {
    need_builder(builder, "esg_constant_in_place");
    if (nbytes && !data) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_constant_in_place: data is NULL");
    const ir::DType dt = static_cast<ir::DType>(dtype);
    if (!ir::dtype_valid(dt)) throw ir::Error(ir::ErrorCode::DType, "esg_constant_in_place: invalid dtype");
    if (reinterpret_cast<uintptr_t>(data) % ir::dtype_size(dt))
      throw ir::Error(ir::ErrorCode::InvalidArgument, std::string("esg_constant_in_place: data is not aligned to its ") +
                                                          std::to_string(ir::dtype_size(dt)) + "-byte " + ir::dtype_name(dt) + " elements");
    const ir::Shape shape = shape_of(dims, rank, "esg_constant_in_place");
    auto bytes = std::make_shared<const ir::Bytes>(static_cast<const uint8_t*>(data), nbytes, std::move(owner),
                                                   ir::constant_line_offset(dt, shape));
    t = make_tensor(builder, builder->core.add_constant(dt, shape, std::move(bytes)));
  });
  return t;
}

ESG_API esg_tensor esg_scalar_like(esg_tensor like, double value) {
  esg_tensor t = invalid();
  esg_builder* b = esg::capi::tensor_ok(like, nullptr) ? like.priv_builder : nullptr;
  guarded(b, [&] {
    const ir::ValueId v = resolve(like, nullptr, "esg_scalar_like: `like`");
    const ir::DType dt = b->core.graph().values[v].dtype;
    if (std::isnan(value) && !ir::dtype_is_float(dt))
      throw ir::Error(ir::ErrorCode::DType, std::string("esg_scalar_like: NaN has no ") + ir::dtype_name(dt) + " value");
    unsigned char bytes[8] = {};
    scalar_bytes(dt, value, bytes);
    t = make_tensor(b, b->core.add_constant(dt, ir::Shape{}, bytes, ir::dtype_size(dt)));
  });
  return t;
}

#define ESG_SCOPE_CALL(fn, body)                          \
  ESG_API esg_status fn {                                 \
    guarded(builder, [&] {                                \
      need_builder(builder, #fn);                         \
      body;                                               \
    });                                                   \
    return esg_last_status();                             \
  }

ESG_SCOPE_CALL(esg_builder_push_name_scope(esg_builder* builder, const char* scope),
               builder->core.push_name_scope(scope ? scope : ""))
ESG_SCOPE_CALL(esg_builder_push_annotation(esg_builder* builder, const char* key, const char* value),
               builder->core.push_annotation(key ? key : "", value ? value : ""))
ESG_SCOPE_CALL(esg_builder_push_control_deps(esg_builder* builder, const esg_tensor* deps, size_t count),
               builder->core.push_control_deps(resolve_all(deps, count, builder, "control dependency")))
ESG_SCOPE_CALL(esg_builder_pop_name_scope(esg_builder* builder), builder->core.pop_name_scope())
ESG_SCOPE_CALL(esg_builder_pop_annotation(esg_builder* builder), builder->core.pop_annotation())
ESG_SCOPE_CALL(esg_builder_pop_control_deps(esg_builder* builder), builder->core.pop_control_deps())
ESG_SCOPE_CALL(esg_builder_begin_subgraph(esg_builder* builder, const esg_tensor* params_like, size_t count),
               builder->core.begin_region(resolve_all(params_like, count, builder, "body parameter")))
ESG_SCOPE_CALL(esg_builder_cancel_subgraph(esg_builder* builder), builder->core.cancel_region())
ESG_SCOPE_CALL(esg_builder_discard_subgraphs(esg_builder* builder, esg_subgraph first), builder->core.discard_regions(first))
#undef ESG_SCOPE_CALL

ESG_API esg_tensor esg_subgraph_param(esg_builder* builder, size_t index) {
  esg_tensor t = invalid();
  guarded(builder, [&] {
    need_builder(builder, "esg_subgraph_param");
    const ir::Span<ir::ValueId> params = builder->core.region_params();
    if (index >= params.size())
      throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_subgraph_param: index " + std::to_string(index) +
                                                          " but the open body has " + std::to_string(params.size()) + " parameter(s)");
    t = make_tensor(builder, params[index]);
  });
  return t;
}

ESG_API esg_subgraph esg_builder_end_subgraph(esg_builder* builder, const esg_tensor* results, size_t count) {
  esg_subgraph s = 0;
  guarded(builder, [&] {
    need_builder(builder, "esg_builder_end_subgraph");
    s = builder->core.end_region(resolve_all(results, count, builder, "body result"));
  });
  return s;
}

ESG_API esg_graph* esg_builder_build(esg_builder* builder, const esg_tensor* outputs, size_t count) {
  esg_graph* g = nullptr;
  guarded(builder, [&] {
    need_builder(builder, "esg_builder_build");
    if (builder->first_status != ESG_OK)
      throw ir::Error(static_cast<ir::ErrorCode>(builder->first_status), "the builder holds an earlier error: " + builder->first_error);
    const std::vector<ir::ValueId> outs = resolve_all(outputs, count, builder, "esg_builder_build: output");
    auto graph = builder->core.finish(outs);
    g = new esg_graph{std::move(graph)};
    esg::capi::new_epoch(builder);
  });
  // A failed build does not reset the builder: the caller may fix the outputs and retry.
  return g;
}

ESG_API bool esg_tensor_valid(esg_tensor tensor) { return esg::capi::tensor_ok(tensor, nullptr); }

namespace {
// The value behind a tensor for the read-only accessors, or null (with the error set).
const ir::Value* value_of(esg_tensor t, const char* fn) {
  const ir::Value* v = nullptr;
  guarded(nullptr, [&] {
    const ir::ValueId id = resolve(t, nullptr, std::string(fn) + ": the tensor");
    v = &t.priv_builder->core.graph().values[id];
  });
  return v;
}
}  // namespace

ESG_API esg_dtype esg_tensor_dtype(esg_tensor tensor) {
  const ir::Value* v = value_of(tensor, "esg_tensor_dtype");
  return v ? static_cast<esg_dtype>(v->dtype) : ESG_DTYPE_INVALID;
}

ESG_API size_t esg_tensor_rank(esg_tensor tensor) {
  const ir::Value* v = value_of(tensor, "esg_tensor_rank");
  return v ? v->rank : SIZE_MAX;
}

ESG_API int64_t esg_tensor_dim(esg_tensor tensor, size_t axis) {
  const ir::Value* v = value_of(tensor, "esg_tensor_dim");
  if (!v) return 0;
  if (axis >= v->rank) {
    esg::capi::set_error(nullptr, ESG_ERR_INVALID_ARGUMENT, "esg_tensor_dim: axis " + std::to_string(axis) + " of a rank-" + std::to_string(v->rank) + " tensor");
    return 0;
  }
  return tensor.priv_builder->core.graph().dims[v->dims + axis];
}

ESG_API const char* esg_symbol_name(esg_tensor tensor, int64_t dim) {
  if (!value_of(tensor, "esg_symbol_name") || !ir::dim_is_symbolic(dim)) return nullptr;
  const ir::Graph& g = tensor.priv_builder->core.graph();
  return ir::dim_symbol(dim) < g.symbols.size() ? g.symbols[ir::dim_symbol(dim)].c_str() : nullptr;
}

ESG_API const char* esg_tensor_name(esg_tensor tensor) {
  if (!value_of(tensor, "esg_tensor_name")) return nullptr;
  return esg::capi::scratch(tensor.priv_builder->core.graph().value_name(tensor.priv_value));
}

ESG_API esg_status esg_tensor_set_name(esg_tensor tensor, const char* name) {
  // A stale tensor's error belongs to no graph: it must not become the new graph's first error.
  guarded(esg::capi::tensor_ok(tensor, nullptr) ? tensor.priv_builder : nullptr, [&] {
    const ir::ValueId v = resolve(tensor, nullptr, "esg_tensor_set_name: the tensor");
    if (!name || !*name) throw ir::Error(ir::ErrorCode::InvalidArgument, "esg_tensor_set_name: the name is empty");
    ir::Graph& g = tensor.priv_builder->core.graph();
    g.values[v].name = g.intern(name);
  });
  return esg_last_status();
}

ESG_API size_t esg_tensor_output_count(esg_tensor tensor) {
  const ir::Value* v = value_of(tensor, "esg_tensor_output_count");
  if (!v) return 0;
  return v->producer == ir::kNone ? 1 : tensor.priv_builder->core.graph().nodes[v->producer].num_outputs;
}

ESG_API esg_tensor esg_tensor_output(esg_tensor tensor, size_t index) {
  const ir::Value* v = value_of(tensor, "esg_tensor_output");
  if (!v) return invalid();
  const size_t n = esg_tensor_output_count(tensor);
  if (index >= n) {
    esg::capi::set_error(nullptr, ESG_ERR_INVALID_ARGUMENT, "esg_tensor_output: index " + std::to_string(index) + " of " + std::to_string(n) + " output(s)");
    return invalid();
  }
  if (v->producer == ir::kNone) return tensor;
  return make_tensor(tensor.priv_builder, tensor.priv_builder->core.graph().nodes[v->producer].first_output + static_cast<ir::ValueId>(index));
}

}  // extern "C"
