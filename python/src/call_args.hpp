// A Python call's arguments bound to an op's parameters by esgraph itself, not by pybind11:
// required ones by position or keyword, options by keyword only. The ops are CPython fast-call
// functions (METH_FASTCALL | METH_KEYWORDS): arguments arrive as an array and a tuple of
// keyword names, and no tuple or dict is made per call. What does not fit (an option
// given by position, an unknown or repeated keyword, a missing argument, a value of the wrong
// Python type) is a TypeError naming the op, the argument and the signature; pybind11's own
// message would print every argument, whole arrays included. Values convert as pybind11's
// casters convert them (an int for a float, a tuple for a list).
#pragma once
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>


namespace esgraph_py {
namespace py = pybind11;

struct ParamSpec {
  enum Kind : uint8_t { Tensor, Tensors, Body, Int, Float, Bool, String, Ints, Floats, DType };
  const char* name;
  Kind kind;
  bool keyword_only;  // an option; the others are required
};

class CallArgs {
 public:
  static constexpr size_t kMaxParams = 16;
  // Binds `args` and `kwargs` to `params` (a static table of the op's); `signature` is the
  // op's, "leaky_relu(x, *, alpha=0.01)".
  template <size_t N>
  CallArgs(const char* signature, const ParamSpec (&params)[N], PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames)
      : CallArgs(signature, params, N, args, nargs, kwnames) {
    static_assert(N <= kMaxParams, "an op with more parameters than CallArgs holds");
  }

  bool has(size_t i) const { return given_[i] != nullptr; }
  // Parameter i as given (None when it was not): a tensor-like or a dtype, checked where used.
  py::object object(size_t i) const { return py::reinterpret_borrow<py::object>(given_[i] ? given_[i] : Py_None); }
  // A list (or tuple) of tensor-likes.
  py::object tensors(size_t i) const;
  template <class T>
  T get(size_t i) const {
    py::detail::make_caster<T> caster;
    if (!caster.load(given_[i], true)) wrong_type(i);
    return py::detail::cast_op<T>(std::move(caster));
  }

 private:
  CallArgs(const char* signature, const ParamSpec* params, size_t num_params, PyObject* const* args, Py_ssize_t nargs,
           PyObject* kwnames);
  [[noreturn]] void fail(const std::string& what) const;
  [[noreturn]] void wrong_type(size_t i) const;

  const char* signature_;
  const ParamSpec* params_;
  size_t num_params_;
  PyObject* given_[kMaxParams] = {};  // borrowed from the call's arguments, which outlive this
};

// An op's body run as a fast-call function: its result, or nullptr with the Python error set,
// C++ exceptions translated by pybind11's registered translators as its own functions do.
template <class Body>
PyObject* fast_call(Body&& body) noexcept {
  try {
    return body().release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (...) {
    if (!py::detail::apply_exception_translators(py::detail::get_local_internals().registered_exception_translators) &&
        !py::detail::apply_exception_translators(py::detail::get_internals().registered_exception_translators))
      PyErr_SetString(PyExc_SystemError, "esgraph: an exception no translator took");
  }
  return nullptr;
}

// Adds the ops of `defs` (ended by an entry with no name) to `m` as built-in functions.
void add_functions(py::module_& m, PyMethodDef* defs);

}  // namespace esgraph_py
