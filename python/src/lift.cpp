#include "lift.hpp"

namespace esgraph_py {

std::vector<BuilderRef>& builder_stack() {
  thread_local std::vector<BuilderRef> stack;
  return stack;
}

std::optional<esg::DType> numpy_dtype(const py::dtype& dt) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (kind == 'f') {
    if (size == 4) return esg::f32;
    if (size == 2) return esg::f16;
    if (size == 8) return esg::f64;
  } else if (kind == 'i') {
    if (size == 1) return esg::i8;
    if (size == 2) return esg::i16;
    if (size == 4) return esg::i32;
    if (size == 8) return esg::i64;
  } else if (kind == 'u' && size == 1) {
    return esg::u8;
  } else if (kind == 'b') {
    return esg::boolean;
  }
  return std::nullopt;
}

esg::DType to_dtype(py::handle obj) {
  if (py::isinstance<esg::DType>(obj)) return obj.cast<esg::DType>();
  if (py::isinstance<py::str>(obj)) {
    const std::string name = obj.cast<std::string>();
    for (int t = ESG_F32; t <= ESG_BOOL; ++t)
      if (name == esg_dtype_name(static_cast<esg_dtype>(t))) return static_cast<esg::DType>(t);
    throw py::value_error("unknown dtype '" + name + "'; dtypes: f32 f16 bf16 f64 i8 i16 i32 i64 u8 bool");
  }
  try {
    if (auto t = numpy_dtype(py::dtype::from_args(py::reinterpret_borrow<py::object>(obj)))) return *t;
  } catch (const py::error_already_set&) {
  }
  throw py::type_error("cannot use " + py::repr(obj).cast<std::string>() + " as a dtype");
}

int64_t enum_index(const char* op, const char* attr, const std::string& value, std::initializer_list<const char*> values) {
  int64_t i = 0;
  std::string valid;
  for (const char* v : values) {
    if (value == v) return i;
    valid += (i++ ? ", " : "") + std::string("'") + v + "'";
  }
  throw py::value_error(std::string(op) + ": `" + attr + "` is '" + value + "'; valid: " + valid);
}

esg::Tensor make_constant(esg::GraphBuilder& b, py::handle obj, std::optional<esg::DType> dtype) {
  py::array arr = py::array::ensure(obj, py::array::c_style | py::array::forcecast);
  if (!arr) throw py::type_error("cannot turn " + py::repr(obj).cast<std::string>() + " into a tensor");
  if (dtype) {
    if (*dtype == esg::bf16) throw py::type_error("numpy has no bf16; build an f32 constant and cast it");
    static const char* kNumpy[] = {"", "float32", "float16", "", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"};
    arr = py::array::ensure(arr.attr("astype")(kNumpy[static_cast<int>(*dtype)]), py::array::c_style);
  }
  const std::optional<esg::DType> t = numpy_dtype(arr.dtype());
  if (!t) throw py::type_error("numpy dtype " + py::str(arr.dtype()).cast<std::string>() + " has no esgraph dtype");
  std::vector<int64_t> shape(arr.shape(), arr.shape() + arr.ndim());
  return b.constant(*t, shape, arr.data(), static_cast<size_t>(arr.nbytes()));
}

Lift::Lift(std::initializer_list<py::handle> args, py::handle seq) {
  for (py::handle a : args) consider(a);
  if (seq && py::isinstance<py::sequence>(seq) && !py::isinstance<py::str>(seq))
    for (py::handle a : seq.cast<py::sequence>()) consider(a);
}

void Lift::consider(py::handle obj) {
  if (owner_) return;
  if (const PyTensor* t = as_tensor(obj)) {
    owner_ = t->owner;
    like_ = t->t;
  }
}

esg::GraphBuilder& Lift::builder() {
  if (!owner_) {
    if (builder_stack().empty())
      throw py::value_error("no builder: call this inside `with esgraph.GraphBuilder() as b:` or pass a Tensor");
    owner_ = builder_stack().back();
  }
  return owner_->b;
}

esg::Tensor Lift::operator()(py::handle obj) {
  if (const PyTensor* t = as_tensor(obj)) return t->t;
  if (obj.is_none()) throw py::type_error("None is not a tensor");
  esg::GraphBuilder& b = builder();
  // Python scalars take the tensor operand's dtype; arrays do when their kind allows it.
  if (like_ && (py::isinstance<py::bool_>(obj) || py::isinstance<py::int_>(obj) || py::isinstance<py::float_>(obj))) {
    const esg::DType t = like_->dtype();
    const bool is_float = py::isinstance<py::float_>(obj);
    if (is_float && t != esg::f32 && t != esg::f16 && t != esg::bf16 && t != esg::f64)
      throw py::type_error("cannot combine the float " + py::repr(obj).cast<std::string>() + " with a " +
                           esg::dtype_name(t) + " tensor; cast the tensor first");
    return like_->scalar(obj.cast<double>());
  }
  std::optional<esg::DType> dtype;
  if (like_) {
    const py::array arr = py::array::ensure(obj);
    const esg::DType t = like_->dtype();
    const bool t_float = t == esg::f32 || t == esg::f16 || t == esg::bf16 || t == esg::f64;
    const char kind = arr ? arr.dtype().kind() : 0;
    if (kind == 'b' || ((kind == 'i' || kind == 'u') && t != esg::boolean) || (kind == 'f' && t_float)) dtype = t;
  } else if (py::isinstance<py::float_>(obj)) {
    dtype = esg::f32;  // a bare Python float is f32, as in the rest of the API
  }
  return make_constant(b, obj, dtype);
}

std::vector<esg::Tensor> Lift::all(py::handle seq) {
  if (!py::isinstance<py::sequence>(seq) || py::isinstance<py::str>(seq))
    throw py::type_error("expected a list of tensors, got " + py::repr(seq).cast<std::string>());
  std::vector<esg::Tensor> out;
  for (py::handle item : seq.cast<py::sequence>()) out.push_back((*this)(item));
  return out;
}

std::vector<esg::Tensor> Lift::results(py::handle r) {
  if (py::isinstance<py::list>(r) || py::isinstance<py::tuple>(r)) return all(r);
  return {(*this)(r)};
}

py::object Lift::wrap(const esg::Tensor& t) const { return to_python(PyTensor{t, owner_}); }

py::object Lift::wrap(const std::vector<esg::Tensor>& ts) const {
  py::list out;
  for (const esg::Tensor& t : ts) out.append(wrap(t));
  return std::move(out);
}

}  // namespace esgraph_py
