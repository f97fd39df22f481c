// esgraph._C: the Python classes (GraphBuilder, Tensor, Graph, DType), the operator overloads
// and the error types; the ops themselves come from the generated py_ops.cpp.
#include "graph_inspect.hpp"
#include "lift.hpp"
#include "prepared_run.hpp"
#include "quantize.hpp"

#include <map>

#include <esgraph/ascend_check.hpp>

namespace esgraph_py {

void bind_ops(py::module_& m);

namespace {

// A path given as str or os.PathLike.
std::string fspath(const py::object& path) { return py::module_::import("os").attr("fspath")(path).cast<std::string>(); }

// A record of facts as a dict: numbers as ints, texts as str, lists as lists of dicts.
py::dict facts_dict(const esg::Facts& facts) {
  py::dict out;
  for (size_t i = 0; i < facts.size(); ++i) {
    const esg::Facts::Entry e = facts[i];
    if (e.kind == ESG_FACT_TEXT) {
      out[py::str(e.key)] = e.text;
    } else if (e.kind == ESG_FACT_LIST) {
      py::list rows;
      for (const esg::Facts& row : facts.rows(e.key)) rows.append(facts_dict(row));
      out[py::str(e.key)] = rows;
    } else {
      out[py::str(e.key)] = e.number;
    }
  }
  return out;
}

// Exceptions that are both esgraph.Error and the builtin a Python user expects.
struct PyErrors {
  py::object base, invalid, shape, dtype, attr, lifetime, format, io, unsupported, backend, limit, cancelled, communication;
};

PyErrors& errors() {
  static PyErrors e;
  return e;
}

py::object new_error(py::module_& m, const char* name, py::handle builtin, const char* doc) {
  py::tuple bases = builtin ? py::make_tuple(errors().base, builtin) : py::make_tuple(py::handle(PyExc_Exception));
  const std::string qual = std::string("esgraph.") + name;
  py::object cls = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(qual.c_str(), doc, bases.ptr(), nullptr));
  if (!cls) throw py::error_already_set();
  m.attr(name) = cls;
  return cls;
}

py::object shape_tuple(const esg::Tensor& t) {
  const std::vector<int64_t> s = t.shape();
  py::tuple out(s.size());
  for (size_t i = 0; i < s.size(); ++i)
    out[i] = s[i] >= 0 ? py::object(py::int_(s[i])) : py::object(py::str(t.dim_name(i)));
  return std::move(out);
}

std::vector<int64_t> dims_of(esg::GraphBuilder& b, const py::sequence& shape) {
  // A string is a sequence too, of its characters: "batch" would be five dimensions.
  if (py::isinstance<py::str>(shape) || py::isinstance<py::bytes>(shape))
    throw py::type_error("a shape is a list of dimensions, not a string (" + py::repr(shape).cast<std::string>() +
                         "): write [" + py::repr(shape).cast<std::string>() + "] for one dynamic dimension");
  std::vector<int64_t> dims;
  for (py::handle d : shape) {
    if (py::isinstance<py::str>(d)) {
      dims.push_back(b.symbol(d.cast<std::string>()));
      continue;
    }
    if (!py::isinstance<py::int_>(d))
      throw py::type_error("a dimension is an int or a symbol name (str), got " + py::repr(d).cast<std::string>());
    // Compared as Python ints: a size beyond int64 is an error about the size, not a cast.
    if (d < py::int_(0))
      throw esg::ShapeError(ESG_ERR_SHAPE, "dimension " + py::repr(d).cast<std::string>() + " is negative; name a dynamic size with a str");
    if (d > py::int_(int64_t{1} << 48))
      throw esg::ShapeError(ESG_ERR_SHAPE, "dimension " + py::repr(d).cast<std::string>() + " is larger than 2^48 (the limit of a tensor's elements)");
    dims.push_back(d.cast<int64_t>());
  }
  return dims;
}

std::vector<esg::Tensor> tensor_list(py::handle obj) {
  std::vector<esg::Tensor> out;
  if (const PyTensor* t = as_tensor(obj)) return {t->t};
  if (!py::isinstance<py::sequence>(obj)) throw py::type_error("expected a Tensor or a list of Tensors, got " + py::repr(obj).cast<std::string>());
  for (py::handle item : obj.cast<py::sequence>()) {
    const PyTensor* t = as_tensor(item);
    if (!t) throw py::type_error("expected Tensors, got " + py::repr(item).cast<std::string>());
    out.push_back(t->t);
  }
  return out;
}

// A `with` scope over a builder's push/pop pair.
struct ScopeGuard {
  BuilderRef owner;
  std::function<esg::GraphBuilder::Scope(esg::GraphBuilder&)> push;
  std::optional<esg::GraphBuilder::Scope> scope;
};

// Both operands of an operator share one type variable, except for the logical ones (bool).
template <class F>
py::object binary(py::handle a, py::handle b, F op, ArgType type = ArgType{0, {}}) {
  Lift lift({{a, type}, {b, type}});
  return lift.wrap(op(lift(a, type), lift(b, type)));
}
constexpr ArgType kBool{-1, esg::DType::Bool};

void bind_tensor(py::module_& m) {
  py::class_<PyTensor> t(m, "Tensor", "A value of a graph being built; shape and dtype are known at once.");
  t.def_property_readonly("shape", [](const PyTensor& self) { return shape_tuple(self.t); },
                          "Sizes, with symbolic dimensions as their names (str).")
      .def_property_readonly("dtype", [](const PyTensor& self) { return self.t.dtype(); })
      .def_property_readonly("ndim", [](const PyTensor& self) { return self.t.rank(); })
      .def_property("name", [](const PyTensor& self) { return self.t.name(); },
                    [](PyTensor& self, py::handle n) { self.t.set_name(text_arg(n, "the name")); })
      .def_property_readonly("valid", [](const PyTensor& self) { return self.t.valid(); },
                             "False once the builder has built its graph.")
      .def("__repr__", [](const PyTensor& self) {
        if (!self.t.valid()) return std::string("<esgraph.Tensor of a built graph>");
        std::string dims;
        for (size_t i = 0; i < self.t.rank(); ++i) dims += (i ? "," : "") + self.t.dim_name(i);
        return "<esgraph.Tensor " + self.t.name() + ": " + esg::dtype_name(self.t.dtype()) + "[" + dims + "]>";
      })
      .def("__bool__", [](const PyTensor&) -> bool {
        throw py::type_error("a graph tensor has no truth value while building; use esgraph.ops.if_ or where");
      })
      .def("__hash__", [](const PyTensor& self) { return std::hash<const void*>()(&self); });

#define ESG_PY_BINARY(dunder, rdunder, fn)                                                               \
  t.def(dunder, [](py::handle a, py::handle b) { return binary(a, b, [](auto x, auto y) { return fn(x, y); }); }, \
        py::is_operator());                                                                              \
  t.def(rdunder, [](py::handle a, py::handle b) { return binary(b, a, [](auto x, auto y) { return fn(x, y); }); }, \
        py::is_operator());
  ESG_PY_BINARY("__add__", "__radd__", esg::add)
  ESG_PY_BINARY("__sub__", "__rsub__", esg::sub)
  ESG_PY_BINARY("__mul__", "__rmul__", esg::mul)
  ESG_PY_BINARY("__truediv__", "__rtruediv__", esg::div)
  ESG_PY_BINARY("__pow__", "__rpow__", esg::pow)
  ESG_PY_BINARY("__matmul__", "__rmatmul__", esg::matmul)
#undef ESG_PY_BINARY
  t.def("__and__", [](py::handle a, py::handle b) { return binary(a, b, [](auto x, auto y) { return esg::logical_and(x, y); }, kBool); }, py::is_operator());
  t.def("__rand__", [](py::handle a, py::handle b) { return binary(b, a, [](auto x, auto y) { return esg::logical_and(x, y); }, kBool); }, py::is_operator());
  t.def("__or__", [](py::handle a, py::handle b) { return binary(a, b, [](auto x, auto y) { return esg::logical_or(x, y); }, kBool); }, py::is_operator());
  t.def("__ror__", [](py::handle a, py::handle b) { return binary(b, a, [](auto x, auto y) { return esg::logical_or(x, y); }, kBool); }, py::is_operator());
  // numpy defers to these operators instead of broadcasting over a Tensor as an object.
  t.attr("__array_ufunc__") = py::none();
#define ESG_PY_COMPARE(dunder, fn) \
  t.def(dunder, [](py::handle a, py::handle b) { return binary(a, b, [](auto x, auto y) { return fn(x, y); }); }, py::is_operator());
  ESG_PY_COMPARE("__lt__", esg::less)
  ESG_PY_COMPARE("__le__", esg::less_equal)
  ESG_PY_COMPARE("__gt__", esg::greater)
  ESG_PY_COMPARE("__ge__", esg::greater_equal)
  ESG_PY_COMPARE("__eq__", esg::equal)
  ESG_PY_COMPARE("__ne__", esg::not_equal)
#undef ESG_PY_COMPARE
  t.def("__neg__", [](const PyTensor& a) { return PyTensor{esg::neg(a.t), a.owner}; });
  t.def("__invert__", [](const PyTensor& a) { return PyTensor{esg::logical_not(a.t), a.owner}; });
}

void bind_graph(py::module_& m) {
  py::class_<esg::Graph>(m, "Graph", "A finished graph: print it, draw it, save it.")
      .def_property_readonly("node_count", &esg::Graph::node_count)
      .def("to_text", &esg::Graph::to_text)
      .def("__str__", &esg::Graph::to_text)
      .def("to_dot", &esg::Graph::to_dot)
      .def("inspect", &inspect_graph,
           "The graph as plain data: name, inputs, outputs (value ids), nodes in order (op, inputs, outputs, "
           "attrs, bodies — each with params, captures as (inner, outer), results and nodes — and for constants "
           "`data`), and values {id: name, dtype, shape}.")
      .def("verify", &esg::Graph::verify)
      .def("save", [](const esg::Graph& g, const py::object& path) { g.save(py::str(path).cast<std::string>()); })
      .def_static("load", [](const py::object& path) { return esg::Graph::load(py::str(path).cast<std::string>()); })
      .def("serialize", [](const esg::Graph& g) {
        const std::vector<uint8_t> b = g.serialize();
        return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
      })
      .def_static("deserialize", [](const py::bytes& data) {
        const std::string s = data;
        return esg::Graph::deserialize(std::vector<uint8_t>(s.begin(), s.end()));
      });
}

void bind_builder(py::module_& m) {
  py::class_<ScopeGuard>(m, "_Scope")
      .def("__enter__", [](ScopeGuard& s) { s.scope.emplace(s.push(s.owner->b)); })
      .def("__exit__", [](ScopeGuard& s, py::args) { s.scope.reset(); });

  py::class_<PyBuilder, BuilderRef>(m, "GraphBuilder",
                                    "Builds one graph; use as `with esgraph.GraphBuilder() as b:`.")
      .def(py::init([](py::handle name) { return std::make_shared<PyBuilder>(text_arg(name, "the graph name")); }), py::arg("name") = "graph")
      .def("__enter__", [](const BuilderRef& self) {
        builder_stack().push_back(self);
        return self;
      })
      .def("__exit__", [](const BuilderRef& self, py::args) {
        auto& stack = builder_stack();
        if (!stack.empty() && stack.back() == self) stack.pop_back();
      })
      .def("input", [](const BuilderRef& self, py::handle name, py::handle dtype, const py::sequence& shape) {
        return PyTensor{self->b.input(text_arg(name, "the input name"), to_dtype(dtype), dims_of(self->b, shape)), self};
      }, py::arg("name"), py::arg("dtype"), py::arg("shape"),
         "A graph input; dimensions are ints or symbol names (str) for dynamic sizes.")
      .def("constant", [](const BuilderRef& self, py::handle value, py::handle dtype, bool copy) {
        const std::optional<esg::DType> t = dtype.is_none() ? std::nullopt : std::optional<esg::DType>(to_dtype(dtype));
        return PyTensor{copy ? make_constant(self->b, value, t) : make_constant_in_place(self->b, value, t), self};
      }, py::arg("value"), py::arg("dtype") = py::none(), py::kw_only(), py::arg("copy") = true,
         "A constant from a numpy array or nested lists, copied. copy=False reads a read-only, C-contiguous numpy array "
         "in place instead, keeping it alive as long as a graph or model uses it.")
      .def("name_scope", [](const BuilderRef& self, py::handle scope) {
        const std::string name = text_arg(scope, "the name scope");
        return ScopeGuard{self, [name](esg::GraphBuilder& b) { return b.name_scope(name); }, std::nullopt};
      })
      .def("annotate", [](const BuilderRef& self, py::handle key_arg, py::handle value_arg) {
        const std::string key = text_arg(key_arg, "the annotation key"), value = text_arg(value_arg, "the annotation");
        return ScopeGuard{self, [key, value](esg::GraphBuilder& b) { return b.annotate(key, value); }, std::nullopt};
      })
      .def("control_deps", [](const BuilderRef& self, py::handle deps) {
        std::vector<esg::Tensor> ts = tensor_list(deps);
        return ScopeGuard{self, [ts](esg::GraphBuilder& b) { return b.control_deps(ts); }, std::nullopt};
      })
      .def("build", [](const BuilderRef& self, py::handle outputs) { return self->b.build(tensor_list(outputs)); },
           py::arg("outputs"), "Finishes the graph; its tensors can no longer be used.");
}

// An input of another dtype than the model's, as the C API does, is refused: anything with a
// dtype of its own (a numpy array or scalar, a torch tensor, an array.array, ...) of another
// dtype, naming the fix; and plain values (lists, tuples, Python numbers) that the input's dtype
// cannot hold: for an integer or bool input, values that do not come back unchanged (fractions,
// NaN, out of range); for a float input, finite values that become infinite. Byte order is not
// a dtype: a byte-swapped array of the right type is converted. With `cast`, numpy's astype
// converts anything (truncating, wrapping), as asked.
void check_input_dtype(esg_model* h, size_t i, py::handle given, const py::array& a, esg::DType want, bool cast) {
  if (cast) return;
  const py::module_ np = py::module_::import("numpy");
  const py::dtype to = numpy_dtype_of(want);
  if (a.dtype().attr("newbyteorder")("=").equal(to)) return;
  const std::string what = "input " + std::to_string(i) + " (`" + esg_model_input_name(h, i) + "`: " + esg::dtype_name(want) + ")";
  const std::string got = py::str(py::handle(a.dtype())).cast<std::string>(), want_np = py::str(to.attr("name")).cast<std::string>();
  // (numpy's float64 is a Python float too, but it has a dtype of its own.)
  const bool plain = !py::isinstance(given, np.attr("generic")) &&
                     (py::isinstance<py::list>(given) || py::isinstance<py::tuple>(given) || py::isinstance<py::bool_>(given) ||
                      py::isinstance<py::int_>(given) || py::isinstance<py::float_>(given));
  if (!plain)
    throw esg::DTypeError(ESG_ERR_DTYPE, what + " got " + got + " data; convert it with .astype(numpy." + want_np + "), or run with cast=True");
  // The trial conversion may overflow or meet NaN: that is what it looks for, not a warning.
  py::object quiet = np.attr("errstate")(py::arg("all") = "ignore");
  quiet.attr("__enter__")();
  struct Leave {
    py::object& ctx;
    ~Leave() { ctx.attr("__exit__")(py::none(), py::none(), py::none()); }
  } leave{quiet};
  const py::object converted = a.attr("astype")(to);
  bool holds;
  if (to.kind() == 'f') {
    const py::object wide = a.attr("astype")(np.attr("float64"));
    holds = np.attr("all")(np.attr("logical_or")(np.attr("isfinite")(converted), np.attr("logical_not")(np.attr("isfinite")(wide))))
                .cast<bool>();
  } else {
    holds = np.attr("array_equal")(converted.attr("astype")(a.dtype()), a).cast<bool>();
  }
  if (!holds)
    throw esg::DTypeError(ESG_ERR_DTYPE, what + " got values of " + got + " that " + esg::dtype_name(want) +
                                             " cannot hold; give a numpy array of " + want_np + ", or run with cast=True");
}

// The outputs of a model whose output sizes the data decides, as the run allocated them: each
// array owns its buffer (freed with the array), no copy.
py::list run_allocated(esg_model* h, const std::vector<esg_buffer>& in) {
  std::vector<esg_buffer> made(esg_model_num_outputs(h));
  struct FreeLeft {  // buffers not yet handed to an array, should making one throw
    std::vector<esg_buffer>& left;
    ~FreeLeft() {
      for (esg_buffer& b : left) esg_buffer_free(&b);
    }
  } free_left{made};
  esg_status status;
  {
    py::gil_scoped_release unlocked;
    status = esg_model_run_allocated(h, in.data(), in.size(), made.data(), made.size());
  }
  esg::detail::check(status);
  py::list outs;
  for (size_t i = 0; i < made.size(); ++i) {
    auto release = [](void* p) {
      auto* b = static_cast<esg_buffer*>(p);
      esg_buffer_free(b);
      delete b;
    };
    std::unique_ptr<esg_buffer, decltype(release)> guard(new esg_buffer(made[i]), release);  // until the capsule holds it
    made[i] = esg_buffer{};
    esg_buffer* owned = guard.get();
    const py::capsule base(owned, release);
    guard.release();
    const auto dt = static_cast<esg::DType>(owned->dtype);
    const std::vector<py::ssize_t> shape(owned->dims, owned->dims + owned->rank);
    const py::dtype want = dt == esg::bf16 ? py::dtype("uint16") : numpy_dtype_of(dt);
    outs.append(owned->data ? py::array(want, shape, owned->data, base) : py::array(want, shape));
  }
  return outs;
}

// numpy arrays in, numpy arrays out, without copies where the dtypes already match. The outputs
// are new arrays, or the caller's (`out`: one C-contiguous, writeable array of the exact dtype
// and shape per output, written in place). With `trace_path`, the run also writes every
// kernel's time there (a Chrome trace).
py::list run_model(const esg::Model& model, const std::vector<py::handle>& args, const char* trace_path = nullptr,
                   py::handle given = py::none(), bool cast = false) {
  esg_model* h = model.handle();
  const size_t n_in = esg_model_num_inputs(h), n_out = esg_model_num_outputs(h);
  if (args.size() != n_in)
    throw esg::InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, "the model takes " + std::to_string(n_in) + " input(s), got " + std::to_string(args.size()));
  std::vector<py::array> arrays;
  std::vector<esg_buffer> in;
  std::vector<std::vector<int64_t>> dims(n_in);
  for (size_t i = 0; i < n_in; ++i) {
    const esg::DType want = static_cast<esg::DType>(esg_model_input_dtype(h, i));
    py::array a = py::array::ensure(args[i], py::array::c_style | py::array::forcecast);
    if (!a) throw py::type_error("input " + std::to_string(i) + " is not array-like");
    if (want == esg::bf16) {
      // numpy has no bf16: its values cross as their bit patterns in uint16, as ONNX's numpy
      // helpers keep them. A float array would be converted by value into nonsense.
      if (!a.dtype().equal(py::dtype("uint16")))
        throw esg::DTypeError(ESG_ERR_DTYPE, "input " + std::to_string(i) + " is bf16: give its bit patterns as a numpy uint16 array, got " +
                                                  py::str(py::handle(a.dtype())).cast<std::string>());
    } else {
      const std::optional<esg::DType> have = numpy_dtype(a.dtype());
      if (!have || *have != want) {
        check_input_dtype(h, i, args[i], a, want, cast);
        a = make_numpy(a, want);
      }
    }
    arrays.push_back(a);
    dims[i].assign(a.shape(), a.shape() + a.ndim());
    // Inputs are only read: a read-only array is fine.
    in.push_back({const_cast<void*>(a.data()), static_cast<size_t>(a.nbytes()), static_cast<esg_dtype>(want), dims[i].data(), dims[i].size()});
  }
  std::vector<py::handle> out_args;
  if (!given.is_none()) {
    if (!py::isinstance<py::sequence>(given)) throw py::type_error("out: expected a list of numpy arrays");
    for (py::handle o : given.cast<py::sequence>()) out_args.push_back(o);
    if (out_args.size() != n_out)
      throw esg::InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, "out: the model has " + std::to_string(n_out) + " output(s), got " + std::to_string(out_args.size()) + " array(s)");
  }
  py::list outs;
  std::vector<esg_buffer> out;
  std::vector<std::vector<int64_t>> odims(n_out, std::vector<int64_t>(8));
  std::vector<esg_dtype> odtypes(n_out);
  bool sized_by_data = false;  // some output's size is known only once the run is done
  for (size_t i = 0; i < n_out; ++i) {
    size_t rank = 0;
    esg::detail::check(esg_model_output_shape(h, in.data(), in.size(), i, &odtypes[i], odims[i].data(), 8, &rank));
    odims[i].resize(rank);
    for (int64_t d : odims[i]) sized_by_data = sized_by_data || d < 0;
  }
  if (sized_by_data) {
    if (!out_args.empty() || trace_path)
      throw esg::InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, std::string(trace_path ? "profile" : "out") +
                                                                    ": the model's output sizes depend on the data; call it without them");
    return run_allocated(h, in);
  }
  for (size_t i = 0; i < n_out; ++i) {
    const esg_dtype dt = odtypes[i];
    const std::vector<py::ssize_t> shape(odims[i].begin(), odims[i].end());
    // bf16 outputs come back as their bit patterns in uint16 (see the inputs above).
    const py::dtype want = static_cast<esg::DType>(dt) == esg::bf16 ? py::dtype("uint16") : numpy_dtype_of(static_cast<esg::DType>(dt));
    py::array a;
    if (out_args.empty()) {
      a = py::array(want, shape);
    } else {
      const std::string what = "out[" + std::to_string(i) + "]: ";
      if (!py::isinstance<py::array>(out_args[i])) throw py::type_error(what + "expected a numpy array");
      a = py::reinterpret_borrow<py::array>(out_args[i]);
      if (!a.dtype().equal(want))
        throw py::type_error(what + "dtype " + py::str(py::handle(a.dtype())).cast<std::string>() + ", the output is " + py::str(py::handle(want)).cast<std::string>());
      if (std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()) != shape)
        throw esg::InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, what + "shape " + py::str(py::tuple(py::cast(std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim())))).cast<std::string>() +
                                                                    ", the output's is " + py::str(py::tuple(py::cast(shape))).cast<std::string>());
      if (!(a.flags() & py::array::c_style) || !a.writeable())
        throw esg::InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, what + "must be C-contiguous and writeable");
      // The run reads inputs and earlier outputs after writing an output: shared bytes would
      // corrupt the results.
      const auto* lo = static_cast<const char*>(a.data());
      auto overlaps = [&](const esg_buffer& other) {
        const auto* b = static_cast<const char*>(other.data);
        return a.nbytes() > 0 && other.nbytes > 0 && lo < b + other.nbytes && b < lo + a.nbytes();
      };
      for (size_t k = 0; k < in.size(); ++k)
        if (overlaps(in[k])) throw esg::InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, what + "shares memory with input " + std::to_string(k));
      for (size_t k = 0; k < out.size(); ++k)
        if (overlaps(out[k])) throw esg::InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, what + "shares memory with out[" + std::to_string(k) + "]");
    }
    out.push_back({a.mutable_data(), static_cast<size_t>(a.nbytes()), dt, odims[i].data(), odims[i].size()});
    outs.append(a);
  }
  esg_status status;
  {
    // Other threads run meanwhile (another run, or one that cancels this); the arrays stay
    // referenced by this frame.
    py::gil_scoped_release unlocked;
    status = trace_path ? esg_model_profile(h, in.data(), in.size(), out.data(), out.size(), trace_path)
                        : esg_model_run(h, in.data(), in.size(), out.data(), out.size());
  }
  esg::detail::check(status);
  return outs;
}

void bind_model(py::module_& m) {
  py::class_<esg::Model> model(m, "Model", "A compiled graph: call it with numpy arrays.");
  bind_prepared_run(m, model);
  model
      .def("__call__", [](const esg::Model& self, py::args args, bool cast) -> py::object {
        py::list outs = run_model(self, std::vector<py::handle>(args.begin(), args.end()), nullptr, py::none(), cast);
        if (outs.size() == 1) return outs[0];
        return py::tuple(outs);
      }, py::kw_only(), py::arg("cast") = false,
         "Runs the model on positional inputs; returns one array, or a tuple for several outputs. Inputs must have "
         "the model's dtypes (lists and numbers convert when the dtype holds them); cast=True converts any.")
      .def("run", [](const esg::Model& self, py::handle inputs, py::handle out, bool cast) {
        std::vector<py::handle> args;
        py::list ordered;  // holds what args point at
        if (py::isinstance<py::dict>(inputs)) {
          ordered = inputs_by_name(self.handle(), inputs.cast<py::dict>(), "run");
          for (py::handle h : ordered) args.push_back(h);
        } else {
          for (py::handle h : inputs.cast<py::sequence>()) args.push_back(h);
        }
        return run_model(self, args, nullptr, out, cast);
      }, py::arg("inputs"), py::kw_only(), py::arg("out") = py::none(), py::arg("cast") = false,
         "Runs on inputs given as {name: array} or a list; returns the outputs as a list. With `out`, a list of "
         "arrays (exact dtype and shape, C-contiguous, writeable), writes the outputs there and returns them.")
      .def("report", &esg::Model::report)
      .def("save", [](const esg::Model& self, const py::object& path) { self.save(fspath(path)); }, py::arg("path"),
           "Writes the model as a compiled-model file (.esgm): its graph, options, target and every plan compiled so far. "
           "esgraph.load_model runs it without compiling (docs/model-format.md).")
      .def("graph", &esg::Model::graph, "The graph the model was compiled from (a loaded model's too).")
      .def("stats", [](const esg::Model& self) { return facts_dict(self.facts()); },
           "Everything the model knows of itself as a dict (docs/facts.md): counts, bytes and levels as ints, texts "
           "as str, lists as lists of dicts. The plan run last is at the top (launches, fused_groups, arena_bytes, "
           "...); the report renders the same record for people.")
      .def("to_dot", &esg::Model::to_dot, "The compiled launch list as Graphviz DOT.")
      .def("cancel", &esg::Model::cancel,
           "Stops the runs under way, from another thread: each raises CancelledError at its next kernel or loop "
           "iteration. Runs that start later are not affected.")
      .def("profile", [](const esg::Model& self, py::args args, const std::string& path) {
        return run_model(self, std::vector<py::handle>(args.begin(), args.end()), path.c_str());
      }, py::arg("path"), "Runs once, writing each kernel's time to `path` as a Chrome trace; returns the outputs as a list.")
      .def_property_readonly("input_names", [](const esg::Model& self) {
        std::vector<std::string> names;
        for (size_t i = 0; i < esg_model_num_inputs(self.handle()); ++i) names.push_back(esg_model_input_name(self.handle(), i));
        return names;
      })
      .def_property_readonly("output_names", [](const esg::Model& self) {
        std::vector<std::string> names;
        for (size_t i = 0; i < esg_model_num_outputs(self.handle()); ++i) names.push_back(esg_model_output_name(self.handle(), i));
        return names;
      });
  m.def("load_model", [](const py::object& path, int threads, int64_t max_loop_iterations, int64_t max_nodes, int64_t max_plans,
                         int64_t max_memory_bytes, bool recompile, bool verify_weights) {
    esg::CompileOptions o;
    o.threads(threads).max_loop_iterations(max_loop_iterations).max_nodes(max_nodes).max_plans(max_plans);
    o.max_memory_bytes(max_memory_bytes).recompile(recompile).skip_weight_check(!verify_weights);
    const std::string file = fspath(path);
    py::gil_scoped_release unlocked;  // reading, checking (and recompiling) lets other Python threads run
    return esg::load_model(file, o);
  }, py::arg("path"), py::kw_only(), py::arg("threads") = 0,
     py::arg("max_loop_iterations") = esg::CompileOptions().c()->max_loop_iterations,
     py::arg("max_nodes") = esg::CompileOptions().c()->max_nodes, py::arg("max_plans") = esg::CompileOptions().c()->max_plans,
     py::arg("max_memory_bytes") = 0, py::arg("recompile") = false, py::arg("verify_weights") = true,
     "The model of a compiled-model file (Model.save): no pass runs and no plan is made for the sizes it holds plans "
     "for. `threads` and the limits are the load's; the compile's own choices (backend, streams, fusion, shapes, "
     "precision, backend options) are the file's. A damaged, truncated or hostile file raises FormatError naming what "
     "is wrong. A file compiled for a CPU with features this one lacks raises UnsupportedError naming them, or with "
     "`recompile` is compiled again from the graph it carries. `verify_weights=False` skips the constants' checksums "
     "(header, graph and plans are always checked).");
  m.def("compile", [](const py::object& source, int streams, int threads, bool fusion, bool memory_reuse, bool verify_each_pass,
                      const std::map<std::string, py::object>& shapes, const std::string& backend, int device, int ai_cores,
                      bool host_fallback, const std::map<std::string, int64_t>& backend_options,
                      int64_t max_loop_iterations, int64_t max_nodes, const std::string& precision, int64_t max_plans,
                      bool grow_memory, int64_t max_memory_bytes, const py::object& cache_dir, int64_t cache_max_bytes,
                      const py::object& cache_source) -> py::object {
    esg::CompileOptions o;
    o.streams(streams).threads(threads).fusion(fusion).memory_reuse(memory_reuse).verify_each_pass(verify_each_pass);
    o.backend(backend).device(device).ai_cores(ai_cores).host_fallback(host_fallback);
    o.max_loop_iterations(max_loop_iterations).max_nodes(max_nodes).precision(precision).max_plans(max_plans);
    o.grow_memory(grow_memory).max_memory_bytes(max_memory_bytes);
    for (const auto& [name, size] : shapes) {  // a size binds the symbol; a (min, max) pair ranges it
      const auto is_int = [](const py::handle& h) { return PyIndex_Check(h.ptr()) && !PyBool_Check(h.ptr()); };
      const std::string what = "compile: shapes[\"" + name + "\"] must be a size or a (min, max) pair of ints, got " +
                               py::repr(size).cast<std::string>();
      if (py::isinstance<py::tuple>(size) || py::isinstance<py::list>(size)) {
        const py::sequence pair = size.cast<py::sequence>();
        if (pair.size() != 2) throw py::value_error(what);
        if (!is_int(pair[0]) || !is_int(pair[1])) throw py::type_error(what);
        o.symbol_range(name, py::int_(pair[0]).cast<int64_t>(), py::int_(pair[1]).cast<int64_t>());
      } else {
        if (!is_int(size)) throw py::type_error(what);
        o.symbol(name, py::int_(size).cast<int64_t>());
      }
    }
    for (const auto& [name, value] : backend_options) o.backend_option(name, value);
    if (!cache_dir.is_none()) o.cache_dir(fspath(cache_dir));
    o.cache_max_bytes(cache_max_bytes);
    if (!cache_source.is_none()) o.cache_source(fspath(cache_source));
    // The compile itself lets the process's other Python threads run (a service's runs go on).
    if (!py::isinstance<esg::Graph>(source)) {  // a file: its model in the compile cache, or None
      const std::string path = fspath(source);
      std::optional<esg::Model> found = [&] {
        py::gil_scoped_release unlocked;
        return esg::find_cached(path, o);
      }();
      return found ? py::cast(std::move(*found)) : py::none();
    }
    const esg::Graph& graph = source.cast<const esg::Graph&>();
    esg::Model model = [&] {
      py::gil_scoped_release unlocked;
      return esg::compile(graph, o);
    }();
    return py::cast(std::move(model));
  }, py::arg("graph"), py::kw_only(), py::arg("streams") = 1, py::arg("threads") = 0, py::arg("fusion") = true,
     py::arg("memory_reuse") = true, py::arg("verify_each_pass") = false,
     py::arg("shapes") = std::map<std::string, py::object>{}, py::arg("backend") = "cpu", py::arg("device") = 0,
     py::arg("ai_cores") = 0, py::arg("host_fallback") = false, py::arg("backend_options") = std::map<std::string, int64_t>{},
     py::arg("max_loop_iterations") = esg::CompileOptions().c()->max_loop_iterations,
     py::arg("max_nodes") = esg::CompileOptions().c()->max_nodes, py::arg("precision") = "f32",
     py::arg("max_plans") = esg::CompileOptions().c()->max_plans, py::arg("grow_memory") = false,
     py::arg("max_memory_bytes") = 0, py::arg("cache_dir") = py::none(),
     py::arg("cache_max_bytes") = esg::CompileOptions().c()->cache_max_bytes, py::arg("cache_source") = py::none(),
     "Compiles a graph. `shapes` binds symbolic dimensions by name (a run with another size is a ShapeError), or "
     "gives a (min, max) range a run's sizes must keep to (its memory planned for its largest size, or with "
     "`grow_memory` grown on demand, per power-of-two class up to it); "
     "the others stay symbolic: one plan per size class (a range is one; an unranged symbol's sizes fall in classes "
     "up to the next power of two), its memory planned for the class's largest sizes, bound to each run's sizes "
     "(stats()['bindings']); a graph no symbolic plan follows compiles per set of input shapes. At most `max_plans` "
     "bindings or plans are kept (the least recently run dropped first; 0: no limit). "
     "`threads` (0: every core) are shared by large kernels and by `streams`, which run at once when there is a "
     "thread per stream. `backend`: 'cpu' (the host), 'ascend' (an Ascend NPU through AscendCL; `device` picks "
     "it, `ai_cores` caps the blocks per kernel) or 'ascend-sim' (the same backend on esgraph's simulated device). "
     "`host_fallback`: on Ascend, ops with no device lowering run on the host, copied off the device and back, "
     "instead of refusing the model. `backend_options`: any option of the backend by name (docs/backends.md). "
     "`max_loop_iterations` (of a run's loops together), `max_nodes` (of the graph) and `max_memory_bytes` (of a "
     "plan's working memory and outputs, or of a tensor whose size a run reads from data; none by default) limit what "
     "a hostile model may ask, 0 for no limit: beyond them is a LimitError. `precision`: 'f32' (default) or 'bf16', convolutions' and constant-weight products' "
     "operands rounded to bfloat16 and summed in f32 where the CPU multiplies bf16 (else an "
     "UnsupportedError naming what it lacks). `cache_dir` (else the ESG_CACHE_DIR environment variable): the compile "
     "cache, a directory of compiled-model files keyed by the graph (or by `cache_source`, the file it was imported "
     "from), the options, the backend, the target and the library version; a hit loads instead of compiling "
     "(stats()['cache_hits']), a miss compiles and stores, at most `cache_max_bytes` kept (least recently used "
     "dropped). esgraph.compile('model.onnx', cache_dir=...) looks the file up before importing it.");
}

void bind_backends(py::module_& m) {
  m.def("backends", &esg::backend_names,
        "The backends this library was built with, the names compile(backend=...) takes ('cpu' first: the default).");
}

void bind_ascend_check(py::module_& m) {
  m.def("ascend_check", [](const std::string& backend) {
    const esg::AscendCheck check = esg::ascend_check(backend);
    py::list cases;
    for (const esg::AscendCheckCase& c : check.cases)
      cases.append(py::dict(py::arg("name") = c.name, py::arg("passed") = c.passed, py::arg("refused") = c.refused, py::arg("max_diff") = c.max_diff,
                            py::arg("tolerance") = c.tolerance, py::arg("ran") = c.ran, py::arg("error") = c.error));
    return py::dict(py::arg("backend") = check.backend, py::arg("device") = check.device, py::arg("cases") = cases,
                    py::arg("passed") = check.passed(), py::arg("partial") = check.partial(), py::arg("table") = check.table());
  }, py::arg("backend") = "ascend",
     "Runs esgraph's Ascend smoke set on `backend` ('ascend', or 'ascend-sim'), each case against the CPU: a dict of "
     "the device's line, the cases (name, passed, refused, max_diff, tolerance, ran, error), passed, partial (every case passed "
     "or was refused by name, some refused), and the table "
     "(esg::ascend_check; `python3 -m esgraph ascend-check` prints it). A device that cannot start raises its "
     "BackendError, naming what is missing.");
}

void bind_errors(py::module_& m) {
  PyErrors& e = errors();
  e.base = new_error(m, "Error", py::handle(), "Base of every esgraph error.");
  e.invalid = new_error(m, "InvalidArgumentError", PyExc_ValueError, "A bad argument or option value.");
  e.shape = new_error(m, "ShapeError", PyExc_ValueError, "Shapes that an op's inference rule rejects.");
  e.dtype = new_error(m, "DTypeError", PyExc_TypeError, "A dtype an op does not accept.");
  e.attr = new_error(m, "AttributeValueError", PyExc_ValueError, "An attribute out of range or of the wrong kind.");
  e.lifetime = new_error(m, "LifetimeError", PyExc_ValueError, "Tensors of two builders, or of a graph already built.");
  e.format = new_error(m, "FormatError", PyExc_ValueError, "A truncated, corrupted or unsupported graph file.");
  e.io = new_error(m, "GraphIOError", PyExc_OSError, "A graph file that cannot be read or written.");
  e.unsupported = new_error(m, "UnsupportedError", PyExc_ValueError, "An option newer than this library.");
  e.backend = new_error(m, "BackendError", PyExc_RuntimeError, "A device runtime that is missing or failed.");
  e.limit = new_error(m, "LimitError", PyExc_RuntimeError,
                      "Beyond a limit: bodies nested too deep, a graph over max_nodes, a loop over max_loop_iterations, "
                      "memory over max_memory_bytes.");
  e.cancelled = new_error(m, "CancelledError", PyExc_RuntimeError, "A run stopped by Model.cancel().");
  e.communication = new_error(m, "CommunicationError", PyExc_RuntimeError,
                              "A collective whose ranks disagree or never arrived, or a failed transport.");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const esg::Error& ex) {
      PyErrors& er = errors();
      py::handle cls = er.base;
      switch (ex.status()) {
        case ESG_ERR_INVALID_ARGUMENT: cls = er.invalid; break;
        case ESG_ERR_SHAPE: cls = er.shape; break;
        case ESG_ERR_DTYPE: cls = er.dtype; break;
        case ESG_ERR_ATTRIBUTE: cls = er.attr; break;
        case ESG_ERR_LIFETIME: cls = er.lifetime; break;
        case ESG_ERR_FORMAT: cls = er.format; break;
        case ESG_ERR_IO: cls = er.io; break;
        case ESG_ERR_UNSUPPORTED: cls = er.unsupported; break;
        case ESG_ERR_BACKEND: cls = er.backend; break;
        case ESG_ERR_LIMIT: cls = er.limit; break;
        case ESG_ERR_CANCELLED: cls = er.cancelled; break;
        case ESG_ERR_COMMUNICATION: cls = er.communication; break;
        default: break;
      }
      PyErr_SetString(cls.ptr(), ex.what());
    }
  });
}

}  // namespace
}  // namespace esgraph_py

PYBIND11_MODULE(_C, m) {
  using namespace esgraph_py;
  m.doc() = "esgraph's compiled core; import esgraph instead.";
  py::enum_<esg::DType> dtype(m, "DType");
  for (esg::DType t : all_dtypes()) {
    dtype.value(esg::dtype_name(t), t);
    m.attr(esg::dtype_name(t)) = t;
  }
  // The numpy dtype of a model's arrays of this dtype; bf16 crosses numpy as uint16 bit patterns.
  dtype.def_property_readonly("numpy", [](esg::DType t) { return t == esg::bf16 ? py::dtype("uint16") : numpy_dtype_of(t); });
  bind_errors(m);
  bind_tensor(m);
  bind_graph(m);
  bind_builder(m);
  bind_model(m);
  bind_backends(m);
  bind_ascend_check(m);
  bind_quantize(m);
  m.def("world", [] {
    const esg::World w = esg::world();
    return py::make_tuple(w.size, w.rank);
  }, "(size, rank): the distributed world collectives run in: the job's processes when an MPI launcher (mpirun) "
     "started this one, else (1, 0). Finding it the first time starts MPI under a launcher.");
  m.def("constant", [](py::handle value, py::handle dtype, bool copy) {
    Lift lift({});
    const std::optional<esg::DType> t = dtype.is_none() ? std::nullopt : std::optional<esg::DType>(to_dtype(dtype));
    return lift.wrap(copy ? make_constant(lift.builder(), value, t) : make_constant_in_place(lift.builder(), value, t));
  }, py::arg("value"), py::arg("dtype") = py::none(), py::kw_only(), py::arg("copy") = true,
     "A constant in the innermost `with` builder, copied; copy=False reads a read-only numpy array in place (Builder.constant).");
  m.attr("__version__") = esg_version();
  // compile's default for max_plans, for what bounds its caches the same way (esgraph.onnx's
  // graphs per set of values).
  m.attr("DEFAULT_MAX_PLANS") = esg::CompileOptions().c()->max_plans;
  py::module_ ops = m.def_submodule("ops", "One function per op of op_defs/.");
  bind_ops(ops);
}
