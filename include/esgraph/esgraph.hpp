// esgraph C++ API: header-only C++17 over the C ABI (<esgraph/c/esgraph.h>).
//
//   esg::GraphBuilder b("mlp");
//   auto x = b.input("x", esg::f32, {b.symbol("batch"), 784});
//   auto h = esg::relu(esg::matmul(x, w1) + b1);
//   esg::Graph g = b.build({h});
//
// Every tensor knows its dtype and shape as soon as it is made; a call the op's rules reject
// throws at the call site (esg::ShapeError, esg::DTypeError, …) with the op, the rule and the
// inputs' shapes in the message.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "esgraph/c/esgraph.h"

namespace esg {

// ---- errors -----------------------------------------------------------------------------------
class Error : public std::runtime_error {
 public:
  Error(esg_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  esg_status status() const noexcept { return status_; }

 private:
  esg_status status_;
};
#define ESG_DEFINE_ERROR(Name) \
  class Name : public Error {  \
   public:                     \
    using Error::Error;        \
  };
ESG_DEFINE_ERROR(InvalidArgumentError)  // a bad argument or option value
ESG_DEFINE_ERROR(ShapeError)            // shapes an op's inference rule rejects
ESG_DEFINE_ERROR(DTypeError)            // dtypes an op does not accept
ESG_DEFINE_ERROR(AttributeError)        // an attribute of the wrong kind or out of range
ESG_DEFINE_ERROR(LifetimeError)         // tensors of two builders, or of a built graph
ESG_DEFINE_ERROR(FormatError)           // a bad graph file
ESG_DEFINE_ERROR(IoError)               // a file that cannot be read or written
ESG_DEFINE_ERROR(UnsupportedError)      // an option newer than the library
ESG_DEFINE_ERROR(BackendError)          // a device runtime that is missing or failed
ESG_DEFINE_ERROR(LimitError)            // nesting, graph size or loop iterations beyond a limit
ESG_DEFINE_ERROR(CancelledError)        // a run stopped by Model::cancel
ESG_DEFINE_ERROR(CommunicationError)    // a collective whose ranks disagree or never arrived
#undef ESG_DEFINE_ERROR

namespace detail {
[[noreturn]] inline void throw_status(esg_status s, const std::string& message) {
  switch (s) {
    case ESG_ERR_INVALID_ARGUMENT: throw InvalidArgumentError(s, message);
    case ESG_ERR_SHAPE: throw ShapeError(s, message);
    case ESG_ERR_DTYPE: throw DTypeError(s, message);
    case ESG_ERR_ATTRIBUTE: throw AttributeError(s, message);
    case ESG_ERR_LIFETIME: throw LifetimeError(s, message);
    case ESG_ERR_FORMAT: throw FormatError(s, message);
    case ESG_ERR_IO: throw IoError(s, message);
    case ESG_ERR_UNSUPPORTED: throw UnsupportedError(s, message);
    case ESG_ERR_OUT_OF_MEMORY: throw std::bad_alloc();
    case ESG_ERR_BACKEND: throw BackendError(s, message);
    case ESG_ERR_LIMIT: throw LimitError(s, message);
    case ESG_ERR_CANCELLED: throw CancelledError(s, message);
    case ESG_ERR_COMMUNICATION: throw CommunicationError(s, message);
    default: throw Error(s, message);
  }
}
[[noreturn]] inline void throw_last() { throw_status(esg_last_status(), esg_last_error()); }
// A string the library allocated, copied and freed; nullptr is the last error.
inline std::string take_string(char* s) {
  if (!s) throw_last();
  std::string out(s);
  esg_free(s);
  return out;
}
inline void check(esg_status s) {
  if (s != ESG_OK) throw_last();
}
// `s` as the C string the C API takes, which ends at a NUL: a name or path holding one would
// arrive cut short, so it is refused, naming `what`.
inline const char* c_text(const std::string& s, const char* what) {
  if (s.find('\0') != std::string::npos) {
    std::string shown;
    for (char c : s) shown += c ? std::string(1, c) : std::string("\\0");
    throw InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, std::string(what) + " '" + shown + "' holds a NUL character, where the C API's strings end");
  }
  return s.c_str();
}
}  // namespace detail

// ---- dtypes -----------------------------------------------------------------------------------
enum class DType : int {
  F32 = ESG_F32, F16 = ESG_F16, BF16 = ESG_BF16, F64 = ESG_F64,
  I8 = ESG_I8, I16 = ESG_I16, I32 = ESG_I32, I64 = ESG_I64, U8 = ESG_U8,
  Bool = ESG_BOOL, U16 = ESG_U16, U32 = ESG_U32, U64 = ESG_U64,
};
inline constexpr DType f32 = DType::F32, f16 = DType::F16, bf16 = DType::BF16, f64 = DType::F64,
                       i8 = DType::I8, i16 = DType::I16, i32 = DType::I32, i64 = DType::I64,
                       u8 = DType::U8, u16 = DType::U16, u32 = DType::U32, u64 = DType::U64,
                       boolean = DType::Bool;
inline const char* dtype_name(DType t) { return esg_dtype_name(static_cast<esg_dtype>(t)); }

// ---- tensors ----------------------------------------------------------------------------------
// A value in a builder's graph: a small handle, cheap to copy. Valid until its builder builds.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(esg_tensor h) : h_(h) {}

  esg_tensor handle() const { return h_; }
  bool valid() const { return esg_tensor_valid(h_); }
  DType dtype() const { return static_cast<DType>(checked(esg_tensor_dtype(h_) != ESG_DTYPE_INVALID, esg_tensor_dtype(h_))); }
  size_t rank() const { return checked(esg_tensor_rank(h_) != SIZE_MAX, esg_tensor_rank(h_)); }
  // Sizes; a symbolic dimension is negative (see dim_name).
  std::vector<int64_t> shape() const {
    std::vector<int64_t> s(rank());
    for (size_t i = 0; i < s.size(); ++i) s[i] = esg_tensor_dim(h_, i);
    return s;
  }
  int64_t dim(size_t axis) const {
    const int64_t d = esg_tensor_dim(h_, axis);
    if (esg_last_status() != ESG_OK) detail::throw_last();
    return d;
  }
  // "128" or the symbol's name ("batch").
  std::string dim_name(size_t axis) const {
    const int64_t d = dim(axis);
    if (d >= 0) return std::to_string(d);
    const char* n = esg_symbol_name(h_, d);
    return n ? n : "?";
  }
  std::string name() const {
    const char* n = esg_tensor_name(h_);
    if (!n) detail::throw_last();
    return n;
  }
  Tensor& set_name(const std::string& name) {
    detail::check(esg_tensor_set_name(h_, detail::c_text(name, "the name")));
    return *this;
  }
  // A rank-0 constant of this tensor's dtype (how scalars join expressions).
  Tensor scalar(double value) const {
    const esg_tensor t = esg_scalar_like(h_, value);
    if (!esg_tensor_valid(t)) detail::throw_last();
    return Tensor(t);
  }

 private:
  template <class T>
  static T checked(bool ok, T v) {
    if (!ok) detail::throw_last();
    return v;
  }
  esg_tensor h_{nullptr, 0, 0};
};

class GraphBuilder;

namespace detail {
// The deleter of an owning wrapper (a unique_ptr) over a C handle: the library's destroy function.
template <auto DestroyFn>
struct Destroyer {
  template <class H>
  void operator()(H* h) const { DestroyFn(h); }
};

inline Tensor checked(esg_tensor t) {
  if (!t.priv_builder) throw_last();  // a call's result: set when it succeeded, zero when it failed
  return Tensor(t);
}
inline std::vector<Tensor> outputs(esg_tensor first) {
  checked(first);
  std::vector<Tensor> out;
  const size_t n = esg_tensor_output_count(first);
  for (size_t i = 0; i < n; ++i) out.push_back(checked(esg_tensor_output(first, i)));
  return out;
}
inline std::vector<esg_tensor> handles(const std::vector<Tensor>& ts) {
  std::vector<esg_tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(t.handle());
  return out;
}
// The builder of a usable tensor; else the tensor's own error (stale, of a destroyed builder).
inline esg_builder* builder_of(const Tensor& t) {
  if (!esg_tensor_valid(t.handle())) {
    (void)esg_tensor_rank(t.handle());  // sets the thread's last error, saying why
    throw_last();
  }
  return t.handle().priv_builder;
}
inline esg_builder* builder_of(const std::vector<Tensor>& ts) {
  return ts.empty() ? nullptr : builder_of(ts.front());
}
inline std::vector<Tensor> to_list(const Tensor& t) { return {t}; }
inline std::vector<Tensor> to_list(std::vector<Tensor> ts) { return ts; }

// The bodies of one op call: discarded unless the op took them, so that an op whose call fails
// (or whose later body's callable throws) leaves nothing in the builder.
class OpBodies {
 public:
  explicit OpBodies(esg_builder* b) : b_(b) {}
  OpBodies(const OpBodies&) = delete;
  OpBodies& operator=(const OpBodies&) = delete;
  ~OpBodies() {
    if (first_ && !taken_) esg_builder_discard_subgraphs(b_, first_);
  }
  esg_subgraph add(esg_subgraph s) {
    if (!first_) first_ = s;
    return s;
  }
  esg_tensor taken_by(esg_tensor result) {
    taken_ = esg_tensor_valid(result);
    return result;
  }

 private:
  esg_builder* b_;
  esg_subgraph first_ = 0;
  bool taken_ = false;
};

// Builds a body from a callable: `fn()` or `fn(params)`, returning a Tensor or a vector. If
// the callable throws, the half-built body is discarded and the builder stays usable.
template <class F>
esg_subgraph body(esg_builder* b, const std::vector<esg_tensor>& params_like, F&& fn) {
  if (!b) throw InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, "a body needs a valid tensor to find its builder");
  check(esg_builder_begin_subgraph(b, params_like.data(), params_like.size()));
  std::vector<esg_tensor> results;
  try {
    if constexpr (std::is_invocable_v<F>) {
      results = handles(to_list(fn()));
    } else {
      std::vector<Tensor> params;
      for (size_t i = 0; i < params_like.size(); ++i) params.push_back(checked(esg_subgraph_param(b, i)));
      results = handles(to_list(fn(params)));
    }
  } catch (...) {
    esg_builder_cancel_subgraph(b);
    throw;
  }
  const esg_subgraph s = esg_builder_end_subgraph(b, results.data(), results.size());
  if (!s) {
    const esg_status status = esg_last_status();
    const std::string message = esg_last_error();
    esg_builder_cancel_subgraph(b);
    throw_status(status, message);
  }
  return s;
}
}  // namespace detail

// ---- graphs -----------------------------------------------------------------------------------
// A finished graph; owns its C handle.
class Graph {
 public:
  explicit Graph(esg_graph* g) : g_(g) {
    if (!g_) detail::throw_last();
  }

  esg_graph* handle() const { return g_.get(); }
  size_t node_count() const { return esg_graph_node_count(g_.get()); }
  std::string to_text() const { return detail::take_string(esg_graph_to_text(g_.get())); }
  std::string to_dot() const { return detail::take_string(esg_graph_to_dot(g_.get())); }
  void verify() const { detail::check(esg_graph_verify(g_.get())); }
  void save(const std::string& path) const { detail::check(esg_graph_save(g_.get(), detail::c_text(path, "the path"))); }
  static Graph load(const std::string& path) { return Graph(esg_graph_load(detail::c_text(path, "the path"))); }
  std::vector<uint8_t> serialize() const {
    void* data = nullptr;
    size_t size = 0;
    detail::check(esg_graph_serialize(g_.get(), &data, &size));
    const auto* p = static_cast<const uint8_t*>(data);
    std::vector<uint8_t> out(p, p + size);
    esg_free(data);
    return out;
  }
  static Graph deserialize(const std::vector<uint8_t>& bytes) {
    return Graph(esg_graph_deserialize(bytes.data(), bytes.size()));
  }

 private:
  std::unique_ptr<esg_graph, detail::Destroyer<esg_graph_destroy>> g_;
};

// ---- builders ---------------------------------------------------------------------------------
class GraphBuilder {
 public:
  // A failed call throws and leaves the builder as it was (no sticky first error, unlike C).
  explicit GraphBuilder(const std::string& name = "graph") : b_(esg_builder_create(detail::c_text(name, "the graph name"))) {
    if (!b_) detail::throw_last();
    esg_builder_set_sticky_errors(b_, false);
  }
  GraphBuilder(const GraphBuilder&) = delete;
  GraphBuilder& operator=(const GraphBuilder&) = delete;
  ~GraphBuilder() { esg_builder_destroy(b_); }

  esg_builder* handle() const { return b_; }

  // A symbolic dimension, usable in input shapes.
  int64_t symbol(const std::string& name) {
    const int64_t d = esg_symbol(b_, detail::c_text(name, "the symbol"));
    if (d == 0) detail::throw_last();
    return d;
  }
  Tensor input(const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
    return detail::checked(esg_input(b_, detail::c_text(name, "the input name"), static_cast<esg_dtype>(dtype), shape.data(), shape.size()));
  }
  Tensor constant(DType dtype, const std::vector<int64_t>& shape, const void* data, size_t nbytes) {
    return detail::checked(esg_constant(b_, static_cast<esg_dtype>(dtype), shape.data(), shape.size(), data, nbytes));
  }
  Tensor constant(const std::vector<float>& values, const std::vector<int64_t>& shape) {
    return constant(f32, shape, values.data(), values.size() * sizeof(float));
  }
  // A constant over `data` in place, not copied (esg_constant_in_place): release(context) runs
  // once, when no graph or model reads the bytes any more, or at once if this throws.
  Tensor constant_in_place(DType dtype, const std::vector<int64_t>& shape, const void* data, size_t nbytes,
                           void (*release)(void*) = nullptr, void* context = nullptr) {
    return detail::checked(esg_constant_in_place(b_, static_cast<esg_dtype>(dtype), shape.data(), shape.size(), data, nbytes,
                                                 release, context));
  }

  // Scopes, as RAII guards: `auto scope = b.name_scope("encoder");`.
  class Scope {
   public:
    Scope(esg_builder* b, esg_status (*pop)(esg_builder*)) : b_(b), pop_(pop) {}
    Scope(Scope&& o) noexcept : b_(std::exchange(o.b_, nullptr)), pop_(o.pop_) {}
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() {
      if (b_) pop_(b_);
    }

   private:
    esg_builder* b_;
    esg_status (*pop_)(esg_builder*);
  };
  [[nodiscard]] Scope name_scope(const std::string& scope) {
    detail::check(esg_builder_push_name_scope(b_, detail::c_text(scope, "the name scope")));
    return Scope(b_, esg_builder_pop_name_scope);
  }
  [[nodiscard]] Scope annotate(const std::string& key, const std::string& value) {
    detail::check(esg_builder_push_annotation(b_, detail::c_text(key, "the annotation key"), detail::c_text(value, "the annotation")));
    return Scope(b_, esg_builder_pop_annotation);
  }
  [[nodiscard]] Scope control_deps(const std::vector<Tensor>& deps) {
    const std::vector<esg_tensor> h = detail::handles(deps);
    detail::check(esg_builder_push_control_deps(b_, h.data(), h.size()));
    return Scope(b_, esg_builder_pop_control_deps);
  }

  // Finishes the graph; tensors made so far can no longer be used with this builder.
  Graph build(const std::vector<Tensor>& outputs) {
    const std::vector<esg_tensor> h = detail::handles(outputs);
    return Graph(esg_builder_build(b_, h.data(), h.size()));
  }

 private:
  esg_builder* b_;
};

// ---- compiled models --------------------------------------------------------------------------
namespace detail {
// Whether elements of C++ type T are how values of `t` lie in memory: the type itself, bool or
// uint8_t for bool, and uint16_t for the 16-bit floats' bit patterns (as numpy and ONNX keep them).
template <class T>
bool holds(DType t) {
  if constexpr (std::is_same_v<T, float>) return t == DType::F32;
  else if constexpr (std::is_same_v<T, double>) return t == DType::F64;
  else if constexpr (std::is_same_v<T, int8_t>) return t == DType::I8;
  else if constexpr (std::is_same_v<T, int16_t>) return t == DType::I16;
  else if constexpr (std::is_same_v<T, int32_t>) return t == DType::I32;
  else if constexpr (std::is_same_v<T, int64_t>) return t == DType::I64;
  else if constexpr (std::is_same_v<T, bool>) return t == DType::Bool;
  else if constexpr (std::is_same_v<T, uint8_t>) return t == DType::U8 || t == DType::Bool;
  else if constexpr (std::is_same_v<T, uint16_t>) return t == DType::U16 || t == DType::F16 || t == DType::BF16;
  else if constexpr (std::is_same_v<T, uint32_t>) return t == DType::U32;
  else if constexpr (std::is_same_v<T, uint64_t>) return t == DType::U64;
  else return false;
}
template <class T>
const char* element_name() {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_same_v<T, int8_t>) return "int8_t";
  else if constexpr (std::is_same_v<T, int16_t>) return "int16_t";
  else if constexpr (std::is_same_v<T, int32_t>) return "int32_t";
  else if constexpr (std::is_same_v<T, int64_t>) return "int64_t";
  else if constexpr (std::is_same_v<T, uint8_t>) return "uint8_t";
  else if constexpr (std::is_same_v<T, uint16_t>) return "uint16_t";
  else if constexpr (std::is_same_v<T, uint32_t>) return "uint32_t";
  else if constexpr (std::is_same_v<T, uint64_t>) return "uint64_t";
  else return "these";
}
}  // namespace detail

// Host data that owns its bytes (row-major): what models take and give.
class HostTensor {
 public:
  HostTensor(DType dtype, std::vector<int64_t> shape)
      : dtype_(dtype), shape_(std::move(shape)), bytes_(count() * esg_dtype_size(static_cast<esg_dtype>(dtype))) {}
  // A tensor holding `values`, which must be of the dtype's own C++ type (no conversion).
  template <class T>
  static HostTensor from(DType dtype, const std::vector<T>& values, std::vector<int64_t> shape) {
    check_element<T>(dtype, "HostTensor::from");
    HostTensor t(dtype, std::move(shape));
    if (values.size() != t.count())
      throw InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, "HostTensor::from: " + std::to_string(values.size()) +
                                                               " values for a shape of " + std::to_string(t.count()) + " elements");
    if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> packs its bits
      for (size_t i = 0; i < values.size(); ++i) t.bytes_[i] = values[i];
    } else if (!values.empty()) {
      std::memcpy(t.bytes_.data(), values.data(), t.bytes_.size());
    }
    return t;
  }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  size_t count() const {
    size_t n = 1;
    for (int64_t d : shape_) n *= static_cast<size_t>(d);
    return n;
  }
  // The elements, as the dtype's own C++ type (anything else is a DTypeError).
  template <class T>
  T* data() {
    check_element<T>(dtype_, "HostTensor::data");
    return reinterpret_cast<T*>(bytes_.data());
  }
  template <class T>
  std::vector<T> values() const {
    check_element<T>(dtype_, "HostTensor::values");
    std::vector<T> out(count());
    if constexpr (std::is_same_v<T, bool>) {
      for (size_t i = 0; i < out.size(); ++i) out[i] = bytes_[i] != 0;
    } else if (!out.empty()) {
      std::memcpy(out.data(), bytes_.data(), bytes_.size());
    }
    return out;
  }
  // The elements' bytes, whatever the dtype (for code that moves bytes, not values).
  uint8_t* raw_bytes() { return bytes_.data(); }
  const uint8_t* raw_bytes() const { return bytes_.data(); }
  esg_buffer buffer() const {
    return esg_buffer{const_cast<uint8_t*>(bytes_.data()), bytes_.size(), static_cast<esg_dtype>(dtype_), shape_.data(), shape_.size()};
  }

 private:
  template <class T>
  static void check_element(DType dtype, const char* what) {
    if (!detail::holds<T>(dtype))
      throw DTypeError(ESG_ERR_DTYPE,
                       std::string(what) + ": " + detail::element_name<T>() + " elements for a tensor of " + dtype_name(dtype));
  }
  DType dtype_;
  std::vector<int64_t> shape_;
  std::vector<uint8_t> bytes_;
};

// The backends this library was built with, the names CompileOptions::backend takes ("cpu" first).
inline std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (size_t i = 0; i < esg_backend_count(); ++i) names.emplace_back(esg_backend_name(i));
  return names;
}

class CompileOptions {
 public:
  CompileOptions() { esg_compile_options_init(&raw_); }
  CompileOptions& streams(int n) { raw_.streams = n; return *this; }
  CompileOptions& threads(int n) { raw_.threads = n; return *this; }
  CompileOptions& fusion(bool on) { raw_.fusion = on; return *this; }
  CompileOptions& memory_reuse(bool on) { raw_.memory_reuse = on; return *this; }
  CompileOptions& verify_each_pass(bool on) { raw_.verify_each_pass = on; return *this; }
  // "cpu" (default), "ascend" or "ascend-sim" (see esg_compile_options).
  CompileOptions& backend(const std::string& name) { backend_ = name; return *this; }
  CompileOptions& device(int id) { raw_.device = id; return *this; }
  CompileOptions& ai_cores(int n) { raw_.ai_cores = n; return *this; }
  CompileOptions& host_fallback(bool on) { raw_.host_fallback = on; return *this; }
  // Limits against hostile models, 0 for none (see esg_compile_options).
  CompileOptions& max_loop_iterations(int64_t n) { raw_.max_loop_iterations = n; return *this; }
  CompileOptions& max_nodes(int64_t n) { raw_.max_nodes = n; return *this; }
  CompileOptions& max_memory_bytes(int64_t n) { raw_.max_memory_bytes = n; return *this; }
  // Bindings to sets of sizes (or plans per set of input shapes) kept, and as many symbolic
  // plans, least recently run dropped first; 0: no limit (see esg_compile_options).
  CompileOptions& max_plans(int64_t n) { raw_.max_plans = n; return *this; }
  // A range's memory grown on demand (per power-of-two class up to its end) rather than planned
  // for its largest size at once.
  CompileOptions& grow_memory(bool on) { raw_.grow_memory = on; return *this; }
  // load_model only: compile again from the file's graph when its target is not this machine's
  // (else refused), and skip the constants' checksums (see esg_compile_options).
  CompileOptions& recompile(bool on) { raw_.recompile = on; return *this; }
  CompileOptions& skip_weight_check(bool on) { raw_.skip_weight_check = on; return *this; }
  // "f32" (default) or "bf16" for convolutions' and constant-weight products' multiplications (see esg_compile_options).
  CompileOptions& precision(const std::string& name) { precision_ = name; return *this; }
  // The compile cache: its directory (else ESG_CACHE_DIR), its bound in bytes, and the file the
  // graph was imported from, to key on instead of the graph (see esg_compile_options).
  CompileOptions& cache_dir(const std::string& dir) { cache_dir_ = dir; return *this; }
  CompileOptions& cache_max_bytes(int64_t n) { raw_.cache_max_bytes = n; return *this; }
  CompileOptions& cache_source(const std::string& path) { cache_source_ = path; return *this; }
  // Any option of the backend by name (see esg_compile_options::backend_options).
  CompileOptions& backend_option(const std::string& name, int64_t value) {
    backend_options_ += (backend_options_.empty() ? "" : ",") + name + "=" + std::to_string(value);
    return *this;
  }
  CompileOptions& symbol(const std::string& name, int64_t size) {
    names_.push_back(name);
    sizes_.push_back(size);
    return *this;
  }
  // A symbolic dimension's allowed sizes, min..max (see esg_compile_options::range_names).
  CompileOptions& symbol_range(const std::string& name, int64_t min, int64_t max) {
    range_names_.push_back(name);
    range_min_.push_back(min);
    range_max_.push_back(max);
    return *this;
  }
  const esg_compile_options* c() const {
    pointers_.clear();
    for (const std::string& n : names_) pointers_.push_back(n.c_str());
    raw_.symbol_names = pointers_.data();
    raw_.symbol_sizes = sizes_.data();
    raw_.num_symbols = names_.size();
    range_pointers_.clear();
    for (const std::string& n : range_names_) range_pointers_.push_back(n.c_str());
    raw_.range_names = range_pointers_.data();
    raw_.range_min = range_min_.data();
    raw_.range_max = range_max_.data();
    raw_.num_ranges = range_names_.size();
    raw_.backend = backend_.empty() ? nullptr : backend_.c_str();
    raw_.backend_options = backend_options_.empty() ? nullptr : backend_options_.c_str();
    raw_.precision = precision_.empty() ? nullptr : precision_.c_str();
    raw_.cache_dir = cache_dir_.empty() ? nullptr : cache_dir_.c_str();
    raw_.cache_source = cache_source_.empty() ? nullptr : cache_source_.c_str();
    return &raw_;
  }

 private:
  mutable esg_compile_options raw_;
  std::vector<std::string> names_, range_names_;
  std::vector<int64_t> sizes_, range_min_, range_max_;
  std::string backend_, backend_options_, precision_, cache_dir_, cache_source_;
  mutable std::vector<const char*> pointers_, range_pointers_;
};

// The distributed world collectives run in (docs/distributed.md): the job's processes under an
// MPI launcher, else this one. Finding it the first time starts MPI under a launcher.
struct World {
  int size = 1;
  int rank = 0;
};
inline World world() {
  World w;
  detail::check(esg_dist_world(&w.size, &w.rank));
  return w;
}
// Makes the caller's MPI communicator (a pointer to an MPI_Comm) the world, before any
// collective is built or run.
inline void use_mpi_comm(const void* mpi_comm) { detail::check(esg_dist_use_mpi_comm(mpi_comm)); }

// A compiled graph; runs are thread-safe (runs of a model with collectives take turns).
// Runs to come on buffers fixed once (Model::prepare): checked and their plan found once, each
// run() then straight to the compiled program. The tensors' bytes may change between runs, not
// the tensors; they must outlive this. One run at a time (esg_model_prepare in esgraph.h).
class PreparedRun {
 public:
  explicit PreparedRun(esg_prepared* p) : p_(p) {
    if (!p_) detail::throw_last();
  }
  void run() { detail::check(esg_prepared_run(p_.get())); }
  esg_prepared* handle() const { return p_.get(); }

 private:
  std::unique_ptr<esg_prepared, detail::Destroyer<esg_prepared_destroy>> p_;
};

// A model's record of facts (esg_model_facts in esgraph.h; docs/facts.md): keyed, typed
// entries in the order they were added; a list's rows are records read the same way. A snapshot:
// later runs do not change it.
class Facts {
 public:
  struct Entry {
    std::string key;
    esg_fact_kind kind;
    int64_t number;  // a count, bytes or level; a list's row count
    std::string text;
  };
  explicit Facts(esg_facts* snapshot) : root_(snapshot, esg_facts_free), record_(snapshot) {
    if (!snapshot) detail::throw_last();
  }
  size_t size() const { return static_cast<size_t>(esg_facts_count(record_)); }
  Entry operator[](size_t index) const {
    esg_fact f;
    detail::check(esg_facts_entry(record_, static_cast<int64_t>(index), &f));
    return entry(f);
  }
  bool has(const std::string& key) const {
    for (size_t i = 0; i < size(); ++i)
      if ((*this)[i].key == key) return true;
    return false;
  }
  // The entry named `key`; InvalidArgumentError when the record has none.
  Entry at(const std::string& key) const {
    esg_fact f;
    detail::check(esg_facts_find(record_, key.c_str(), &f));
    return entry(f);
  }
  int64_t number(const std::string& key) const { return at(key).number; }
  std::string text(const std::string& key) const { return at(key).text; }
  // The rows of the list `key`: none when the record has no such list (a list with no rows is
  // left out).
  std::vector<Facts> rows(const std::string& key) const {
    std::vector<Facts> out;
    for (size_t i = 0; i < size(); ++i) {
      const Entry e = (*this)[i];
      if (e.key != key) continue;
      for (int64_t r = 0; e.kind == ESG_FACT_LIST && r < e.number; ++r) {
        const esg_facts* row = esg_facts_row(record_, static_cast<int64_t>(i), r);
        if (!row) detail::throw_last();
        out.push_back(Facts(root_, row));
      }
    }
    return out;
  }

 private:
  Facts(std::shared_ptr<esg_facts> root, const esg_facts* record) : root_(std::move(root)), record_(record) {}
  static Entry entry(const esg_fact& f) { return {f.key, static_cast<esg_fact_kind>(f.kind), f.number, f.text}; }
  std::shared_ptr<esg_facts> root_;  // the snapshot, which holds every row
  const esg_facts* record_;
};

class Model {
 public:
  explicit Model(esg_model* m) : m_(m) {
    if (!m_) detail::throw_last();
  }

  esg_model* handle() const { return m_.get(); }
  // Runs into newly allocated outputs (of the sizes the run comes to where the data decides them).
  std::vector<HostTensor> run(const std::vector<HostTensor>& inputs) const {
    const std::vector<esg_buffer> in = buffers(inputs);
    const std::vector<OutputType> types = output_types(in);
    const bool sized_by_data = std::any_of(types.begin(), types.end(), [](const OutputType& t) {
      return std::any_of(t.dims.begin(), t.dims.end(), [](int64_t d) { return d < 0; });
    });
    std::vector<HostTensor> outs;
    if (sized_by_data) {
      std::vector<esg_buffer> made(types.size());
      detail::check(esg_model_run_allocated(m_.get(), in.data(), in.size(), made.data(), made.size()));
      for (esg_buffer& b : made) {
        try {
          outs.emplace_back(static_cast<DType>(b.dtype), std::vector<int64_t>(b.dims, b.dims + b.rank));
          if (b.nbytes) std::memcpy(outs.back().raw_bytes(), b.data, b.nbytes);
        } catch (...) {
          for (esg_buffer& left : made) esg_buffer_free(&left);
          throw;
        }
        esg_buffer_free(&b);
      }
      return outs;
    }
    for (const OutputType& t : types) outs.emplace_back(t.dtype, t.dims);
    run(inputs, outs);
    return outs;
  }
  // Outputs of the right dtypes and shapes for these inputs; an InvalidArgumentError when the data
  // decides an output's size (run(inputs) allocates those).
  std::vector<HostTensor> allocate_outputs(const std::vector<HostTensor>& inputs) const {
    std::vector<HostTensor> outs;
    for (const OutputType& t : output_types(buffers(inputs))) {
      if (std::any_of(t.dims.begin(), t.dims.end(), [](int64_t d) { return d < 0; }))
        throw InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, "allocate_outputs: output " + std::to_string(outs.size()) +
                                                                 "'s size depends on the data; run(inputs) allocates it");
      outs.emplace_back(t.dtype, t.dims);
    }
    return outs;
  }
  // Runs into the caller's outputs (zero-copy).
  void run(const std::vector<HostTensor>& inputs, std::vector<HostTensor>& outputs) const {
    const std::vector<esg_buffer> in = buffers(inputs), out = buffers(outputs);
    detail::check(esg_model_run(m_.get(), in.data(), in.size(), out.data(), out.size()));
  }
  // Runs to come on these tensors (PreparedRun), for small models run many times.
  PreparedRun prepare(const std::vector<HostTensor>& inputs, std::vector<HostTensor>& outputs) const {
    const std::vector<esg_buffer> in = buffers(inputs), out = buffers(outputs);
    return PreparedRun(esg_model_prepare(m_.get(), in.data(), in.size(), out.data(), out.size()));
  }
  // Temporaries would be gone before the first run.
  PreparedRun prepare(std::vector<HostTensor>&& inputs, std::vector<HostTensor>& outputs) const = delete;
  // Runs once and writes every kernel's time to `trace_path` as a Chrome trace.
  std::vector<HostTensor> profile(const std::vector<HostTensor>& inputs, const std::string& trace_path) const {
    std::vector<HostTensor> outs = allocate_outputs(inputs);
    const std::vector<esg_buffer> in = buffers(inputs), out = buffers(outs);
    detail::check(esg_model_profile(m_.get(), in.data(), in.size(), out.data(), out.size(), trace_path.c_str()));
    return outs;
  }
  // What compiling did, for people: the facts as text (its wording may change).
  std::string report() const { return detail::take_string(esg_model_report(m_.get())); }
  // Everything the model knows of itself, for tools and tests.
  Facts facts() const { return Facts(esg_model_facts(m_.get())); }
  // Writes the model as a compiled-model file, which load_model runs without compiling
  // (docs/model-format.md).
  void save(const std::string& path) const { detail::check(esg_model_save(m_.get(), detail::c_text(path, "the path"))); }
  // The graph the model was compiled from (a loaded model's too).
  Graph graph() const { return Graph(esg_model_graph(m_.get())); }
  // The main counts of facts() in a struct (launches, fused groups, arena bytes, ...).
  esg_model_stats stats() const {
    esg_model_stats s;
    detail::check(esg_model_get_stats(m_.get(), &s));
    return s;
  }
  // The compiled launch list (kernels, fused groups, streams) as Graphviz DOT.
  std::string to_dot() const { return detail::take_string(esg_model_to_dot(m_.get())); }
  // Stops the runs under way (from any thread): each throws CancelledError. Later runs go on.
  void cancel() const { detail::check(esg_model_cancel(m_.get())); }

 private:
  struct OutputType {
    DType dtype;
    std::vector<int64_t> dims;  // -1 where the data decides the size
  };
  static std::vector<esg_buffer> buffers(const std::vector<HostTensor>& tensors) {
    std::vector<esg_buffer> out;
    out.reserve(tensors.size());
    for (const HostTensor& t : tensors) out.push_back(t.buffer());
    return out;
  }
  std::vector<OutputType> output_types(const std::vector<esg_buffer>& in) const {
    std::vector<OutputType> types;
    for (size_t i = 0; i < esg_model_num_outputs(m_.get()); ++i) {
      esg_dtype dt;
      int64_t dims[8];
      size_t rank = 0;
      detail::check(esg_model_output_shape(m_.get(), in.data(), in.size(), i, &dt, dims, 8, &rank));
      types.push_back({static_cast<DType>(dt), std::vector<int64_t>(dims, dims + rank)});
    }
    return types;
  }

  std::unique_ptr<esg_model, detail::Destroyer<esg_model_destroy>> m_;
};

inline Model compile(const Graph& graph, const CompileOptions& options = {}) {
  return Model(esg_compile(graph.handle(), options.c()));
}
// The model of a compiled-model file (Model::save): no pass runs and no plan is made for the
// sizes it holds plans for. `options` sets threads, limits, recompile and skip_weight_check;
// the compile's own choices are the file's.
inline Model load_model(const std::string& path, const CompileOptions& options = {}) {
  return Model(esg_model_load(detail::c_text(path, "the path"), options.c()));
}
// The compile cache's model for the file at `source_path` compiled with `options` (stored by a
// compile whose options named that file as cache_source), or none: look before importing.
inline std::optional<Model> find_cached(const std::string& source_path, const CompileOptions& options = {}) {
  esg_model* m = esg_model_find_cached(source_path.c_str(), options.c());
  if (!m) {
    detail::check(esg_last_status());
    return std::nullopt;
  }
  return Model(m);
}


// ---- post-training quantization (esg_quantize in esgraph.h; docs/quantization.md) ----------
enum class Calibration { MinMax = ESG_CALIBRATE_MINMAX, Percentile = ESG_CALIBRATE_PERCENTILE, Entropy = ESG_CALIBRATE_ENTROPY };
struct QuantizeOptions {
  Calibration calibration = Calibration::MinMax;
  double percentile = 99.99;            // Percentile: the share of each activation's values inside its range
  int64_t bins = 2048;                  // Percentile and Entropy: histogram bins over [0, max |x|]
  bool per_channel = true;              // weights: a scale per output channel, else one per tensor
  bool symmetric = false;               // activations: i8 around 0, else u8 with a zero point
  std::vector<std::string> keep_float;  // node, result or op names left in f32
  int threads = 0;                      // the calibration runs' (0: every core)
  int weight_only_bits = 0;             // 2, 4 or 8: weight-only products (matmul_nbits); 0: int8 throughout
  int block_size = 32;                  // weight-only: the codes' blocks along K
};
// One quantized op: its result's quantization, and the error at its result against the float
// graph over the calibration batches (esg_quantized_layer).
struct QuantizedLayer {
  std::string name, op;
  bool quantized_result;
  double scale;
  int64_t zero_point;
  double min, max, max_error, sqnr_db;
};
struct Quantized {
  Graph graph;
  std::vector<QuantizedLayer> layers;
};
// `graph` quantized to 8 bits, calibrated on `batches` (each a full set of its inputs); or its
// products' weights alone (weight_only_bits), `batches` then optional.
inline Quantized quantize(const Graph& graph, const std::vector<std::vector<HostTensor>>& batches, const QuantizeOptions& options = {}) {
  esg_quantize_options o;
  esg_quantize_options_init(&o);
  o.calibration = static_cast<int32_t>(options.calibration);
  o.percentile = options.percentile;
  o.bins = options.bins;
  o.per_tensor_weights = !options.per_channel;
  o.symmetric = options.symmetric;
  std::vector<const char*> kept;
  for (const std::string& name : options.keep_float) kept.push_back(name.c_str());
  o.keep_float = kept.data();
  o.num_keep_float = kept.size();
  o.threads = options.threads;
  o.weight_only_bits = options.weight_only_bits;
  o.block_size = options.block_size;
  std::vector<esg_buffer> flat;
  const size_t inputs = esg_graph_input_count(graph.handle());
  for (size_t b = 0; b < batches.size(); ++b) {
    if (batches[b].size() != inputs)
      throw InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, "quantize: calibration batch " + std::to_string(b) + " has " +
                                                               std::to_string(batches[b].size()) + " tensors; the graph takes " +
                                                               std::to_string(inputs) + " inputs");
    for (const HostTensor& t : batches[b]) flat.push_back(t.buffer());
  }
  std::unique_ptr<esg_quantized, detail::Destroyer<esg_quantized_destroy>> q(esg_quantize(graph.handle(), flat.data(), batches.size(), &o));
  if (!q) detail::throw_last();
  Quantized out{Graph(esg_quantized_graph(q.get())), {}};
  for (size_t i = 0; i < esg_quantized_num_layers(q.get()); ++i) {
    esg_quantized_layer l;
    detail::check(esg_quantized_layer_get(q.get(), i, &l));
    out.layers.push_back({l.name, l.op, l.quantized_result, l.scale, l.zero_point, l.min, l.max, l.max_error, l.sqnr_db});
  }
  return out;
}

}  // namespace esg

#include "esgraph/ops.hpp"

namespace esg {

// ---- operators --------------------------------------------------------------------------------
// Arithmetic scalars become rank-0 constants of the tensor operand's dtype.
template <class S>
using if_scalar = std::enable_if_t<std::is_arithmetic_v<S>, int>;

#define ESG_BINARY_OPERATOR(sym, op)                                                                  \
  inline Tensor operator sym(const Tensor& a, const Tensor& b) { return op(a, b); }                   \
  template <class S, if_scalar<S> = 0>                                                                \
  Tensor operator sym(const Tensor& a, S b) { return op(a, a.scalar(static_cast<double>(b))); }      \
  template <class S, if_scalar<S> = 0>                                                                \
  Tensor operator sym(S a, const Tensor& b) { return op(b.scalar(static_cast<double>(a)), b); }
ESG_BINARY_OPERATOR(+, add)
ESG_BINARY_OPERATOR(-, sub)
ESG_BINARY_OPERATOR(*, mul)
ESG_BINARY_OPERATOR(/, div)
ESG_BINARY_OPERATOR(<, less)
ESG_BINARY_OPERATOR(<=, less_equal)
ESG_BINARY_OPERATOR(>, greater)
ESG_BINARY_OPERATOR(>=, greater_equal)
ESG_BINARY_OPERATOR(==, equal)
ESG_BINARY_OPERATOR(!=, not_equal)
#undef ESG_BINARY_OPERATOR

inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator!(const Tensor& a) { return logical_not(a); }
inline Tensor operator&&(const Tensor& a, const Tensor& b) { return logical_and(a, b); }
inline Tensor operator||(const Tensor& a, const Tensor& b) { return logical_or(a, b); }

}  // namespace esg
