// Python values into graph tensors and back: the glue every binding shares.
//
// A Python Tensor holds its builder (shared), so a builder lives as long as any of its tensors.
// Arguments that are not Tensors — numpy arrays, Python scalars — become constants in the
// builder of the call's Tensor arguments, taking that tensor's dtype when the conversion keeps
// the value's kind (so `x + 1` and `x * np.ones(3)` work for an f32 `x`).
#pragma once
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <esgraph/esgraph.hpp>

namespace esgraph_py {
namespace py = pybind11;

struct PyBuilder {
  explicit PyBuilder(const std::string& name) : b(name) {}
  esg::GraphBuilder b;
};
using BuilderRef = std::shared_ptr<PyBuilder>;

struct PyTensor {
  esg::Tensor t;
  BuilderRef owner;
};

// The Tensor behind a Python object, or nullptr. Every op call asks this of every argument, so
// it compares the exact type and reads the instance directly instead of going through
// pybind11's type lookup (which hashed type names and dominated the cost of a call).
inline PyTensor* as_tensor(py::handle obj) {
  static const py::detail::type_info* type = py::detail::get_type_info(typeid(PyTensor));
  if (!obj || Py_TYPE(obj.ptr()) != type->type) return nullptr;
  auto* inst = reinterpret_cast<py::detail::instance*>(obj.ptr());
  return inst->get_value_and_holder(type).value_ptr<PyTensor>();
}

// A new Python Tensor, again without the type lookup of py::cast.
inline py::object to_python(PyTensor t) {
  static const py::detail::type_info* type = py::detail::get_type_info(typeid(PyTensor));
  auto move = [](const void* p) -> void* { return new PyTensor(std::move(*static_cast<PyTensor*>(const_cast<void*>(p)))); };
  return py::reinterpret_steal<py::object>(
      py::detail::type_caster_generic::cast(&t, py::return_value_policy::move, py::handle(), type, nullptr, move));
}

// The builders entered with `with`, innermost last (per thread).
std::vector<BuilderRef>& builder_stack();

const std::vector<esg::DType>& all_dtypes();  // in code order
esg::DType to_dtype(py::handle obj);  // DType, "f32", numpy dtype or type
std::optional<esg::DType> numpy_dtype(const py::dtype& dt);
int64_t enum_index(const char* op, const char* attr, const std::string& value, std::initializer_list<const char*> values);
// The numpy dtype of an esgraph dtype (bf16 has none: an esgraph.DTypeError).
py::dtype numpy_dtype_of(esg::DType dtype);
// `a` as a C-contiguous array of `dtype` (a copy when it is not one already).
py::array make_numpy(const py::array& a, esg::DType dtype);

// A str argument as UTF-8, or an esgraph error naming `what`: a lone surrogate has no UTF-8
// form (pybind11 would report only that no overload matched).
std::string text_arg(py::handle obj, const char* what);

// A constant holding `value` (a Python scalar or any array-like) with `dtype`, or with the
// value's own dtype (numpy's, except that Python floats default to f32).
esg::Tensor make_constant(esg::GraphBuilder& b, py::handle value, std::optional<esg::DType> dtype);
// A constant over a read-only, C-contiguous numpy array's memory, not copied: the graph keeps
// the array alive. Anything else (a writeable array, a dtype to convert to) is refused by name.
esg::Tensor make_constant_in_place(esg::GraphBuilder& b, py::handle value, std::optional<esg::DType> dtype);

// How an argument is typed in its op: by a type variable (shared with other arguments), a
// fixed dtype, or anything (type_var < 0 and fixed Invalid).
struct ArgType {
  int8_t type_var = -1;
  esg::DType fixed = static_cast<esg::DType>(0);
};
struct Arg {
  py::handle obj;
  ArgType type;
};

class Lift {
 public:
  // Finds the builder among the call's Tensor arguments (`seq` is a list argument, e.g.
  // concat's inputs), falling back to the innermost `with` builder, and the dtype each type
  // variable has in this call, from the first Tensor argument of that variable.
  explicit Lift(std::initializer_list<Arg> args, Arg seq = {});

  // The argument as a tensor: Tensors as they are; Python scalars and array-likes become
  // constants of the dtype their slot has in this call (its type variable's or fixed dtype)
  // when the value's kind allows it, else of their own dtype (Python floats: f32).
  esg::Tensor operator()(py::handle obj, ArgType type);
  std::vector<esg::Tensor> all(py::handle seq, ArgType type);
  esg::GraphBuilder& builder();

  py::object wrap(const esg::Tensor& t) const;
  py::object wrap(const std::vector<esg::Tensor>& ts) const;

  // Bodies of control-flow ops from Python callables returning tensors or liftable values; a
  // loop body's results take the dtypes of the loop-carried values.
  auto branch(py::function f) {
    return [this, f]() { return results(f(), {}); };
  }
  auto body(py::function f) {
    return [this, f](const std::vector<esg::Tensor>& params) {
      py::tuple args(params.size());
      std::vector<esg::DType> types;
      for (size_t i = 0; i < params.size(); ++i) {
        args[i] = wrap(params[i]);
        types.push_back(params[i].dtype());
      }
      return results(f(*args), types);
    };
  }

 private:
  void consider(py::handle obj, ArgType type);
  std::vector<esg::Tensor> results(py::handle r, const std::vector<esg::DType>& types);

  BuilderRef owner_;
  std::optional<esg::Tensor> like_[8];  // per type variable: the first Tensor argument
};

}  // namespace esgraph_py
