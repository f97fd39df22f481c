// A Python call's arguments bound to an op's parameters by esgraph itself, not by pybind11:
// required ones by position or keyword, options by keyword only. What does not fit (an option
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
  CallArgs(const char* signature, const ParamSpec (&params)[N], const py::args& args, const py::kwargs& kwargs)
      : CallArgs(signature, params, N, args, kwargs) {
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
  CallArgs(const char* signature, const ParamSpec* params, size_t num_params, const py::args& args, const py::kwargs& kwargs);
  [[noreturn]] void fail(const std::string& what) const;
  [[noreturn]] void wrong_type(size_t i) const;

  const char* signature_;
  const ParamSpec* params_;
  size_t num_params_;
  PyObject* given_[kMaxParams] = {};  // borrowed from args and kwargs, which outlive this
};

}  // namespace esgraph_py
