#include "call_args.hpp"

#include <string>
#include <vector>

namespace esgraph_py {
namespace {

const char* kind_name(ParamSpec::Kind k) {
  switch (k) {
    case ParamSpec::Tensor: return "a tensor, an array or a number";
    case ParamSpec::Tensors: return "a list of tensors";
    case ParamSpec::Body: return "a function";
    case ParamSpec::Int: return "an int";
    case ParamSpec::Float: return "a float";
    case ParamSpec::Bool: return "a bool";
    case ParamSpec::String: return "a str";
    case ParamSpec::Ints: return "a list of ints";
    case ParamSpec::Floats: return "a list of floats";
    case ParamSpec::DType: return "a dtype";
  }
  return "?";
}

// "a list", "an int": the Python type of `obj` with its article.
std::string type_of(py::handle obj) {
  std::string name = Py_TYPE(obj.ptr())->tp_name;
  name = name.substr(name.rfind('.') + 1);  // "esgraph._C.Tensor" reads "Tensor"
  return (std::string("aeiou").find(name[0]) != std::string::npos ? "an " : "a ") + name;
}

template <class T>
bool loads(py::handle obj) {
  return py::detail::make_caster<T>().load(obj, true);
}

bool fits(ParamSpec::Kind kind, py::handle obj) {
  switch (kind) {
    case ParamSpec::Int: return loads<int64_t>(obj);
    case ParamSpec::Float: return loads<double>(obj);
    default: return true;
  }
}

// What `obj` is, said so as to show why it is not of `kind`.
std::string what_is(ParamSpec::Kind kind, py::handle obj) {
  if (kind == ParamSpec::Int && PyLong_Check(obj.ptr()) && !PyBool_Check(obj.ptr())) return "an int beyond the 64-bit range";
  if ((kind == ParamSpec::Ints || kind == ParamSpec::Floats) && py::isinstance<py::sequence>(obj) && !py::isinstance<py::str>(obj)) {
    const ParamSpec::Kind item_kind = kind == ParamSpec::Ints ? ParamSpec::Int : ParamSpec::Float;
    const py::sequence seq = py::reinterpret_borrow<py::sequence>(obj);
    for (size_t i = 0; i < seq.size(); ++i) {
      const py::object item = seq[i];
      if (!fits(item_kind, item)) return type_of(obj) + " whose item " + std::to_string(i) + " is " + what_is(item_kind, item);
    }
  }
  return type_of(obj);
}

}  // namespace

CallArgs::CallArgs(const char* signature, const ParamSpec* params, size_t num_params, PyObject* const* args, Py_ssize_t nargs,
                   PyObject* kwnames)
    : signature_(signature), params_(params), num_params_(num_params) {
  size_t positional = 0;
  while (positional < num_params_ && !params_[positional].keyword_only) ++positional;  // options come last
  const auto given_positional = static_cast<size_t>(nargs);
  if (given_positional > positional) {
    std::string names;
    for (size_t i = positional; i < num_params_; ++i) names += (names.empty() ? "`" : ", `") + std::string(params_[i].name) + "`";
    fail("takes " + std::to_string(positional) + " positional argument" + (positional == 1 ? "" : "s") + ", got " +
         std::to_string(given_positional) +
         (names.empty() ? "" : "; " + names + (num_params_ - positional == 1 ? " is" : " are") + " keyword-only"));
  }
  for (size_t i = 0; i < given_positional; ++i) given_[i] = args[i];
  const Py_ssize_t num_keywords = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < num_keywords; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    size_t at = 0;
    while (at < num_params_ && PyUnicode_CompareWithASCIIString(key, params_[at].name) != 0) ++at;
    if (at == num_params_) {
      std::string names;
      for (size_t i = 0; i < num_params_; ++i) names += (names.empty() ? "`" : ", `") + std::string(params_[i].name) + "`";
      fail("no argument `" + py::str(key).cast<std::string>() + "` (it takes " + names + ")");
    }
    if (given_[at]) fail("`" + std::string(params_[at].name) + "` given twice, by position and by keyword");
    given_[at] = args[nargs + k];
  }
  for (size_t i = 0; i < positional; ++i)
    if (!given_[i]) fail("missing `" + std::string(params_[i].name) + "`");
}

py::object CallArgs::tensors(size_t i) const {
  const py::handle v = given_[i];
  if (!PyList_Check(v.ptr()) && !PyTuple_Check(v.ptr())) wrong_type(i);
  return py::reinterpret_borrow<py::object>(v);
}

void add_functions(py::module_& m, PyMethodDef* defs) {
  const py::object module_name = m.attr("__name__");
  for (PyMethodDef* d = defs; d->ml_name; ++d) {
    PyObject* f = PyCFunction_NewEx(d, nullptr, module_name.ptr());
    if (!f) throw py::error_already_set();
    m.add_object(d->ml_name, py::reinterpret_steal<py::object>(f));
  }
}

void CallArgs::fail(const std::string& what) const {
  const std::string sig = signature_;
  throw py::type_error("ops." + sig.substr(0, sig.find('(')) + ": " + what + "; the signature is ops." + sig);
}

void CallArgs::wrong_type(size_t i) const {
  fail("`" + std::string(params_[i].name) + "` takes " + kind_name(params_[i].kind) + ", got " + what_is(params_[i].kind, given_[i]));
}

}  // namespace esgraph_py
