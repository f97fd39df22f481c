#include "lift.hpp"

#include <cmath>
#include <cstring>

namespace esgraph_py {

std::vector<BuilderRef>& builder_stack() {
  thread_local std::vector<BuilderRef> stack;
  return stack;
}

std::optional<esg::DType> numpy_dtype(const py::dtype& dt) {
  if (!dt.attr("isnative").cast<bool>()) return std::nullopt;  // byte-swapped: converted like any other dtype
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
  } else if (kind == 'u') {
    if (size == 1) return esg::u8;
    if (size == 2) return esg::u16;
    if (size == 4) return esg::u32;
    if (size == 8) return esg::u64;
  } else if (kind == 'b') {
    return esg::boolean;
  }
  return std::nullopt;
}

const std::vector<esg::DType>& all_dtypes() {
  static const std::vector<esg::DType> kAll = [] {
    std::vector<esg::DType> all;  // codes are dense from f32 on; the first without a size ends them
    for (int t = ESG_F32; esg_dtype_size(static_cast<esg_dtype>(t)) != 0; ++t) all.push_back(static_cast<esg::DType>(t));
    return all;
  }();
  return kAll;
}

esg::DType to_dtype(py::handle obj) {
  if (py::isinstance<esg::DType>(obj)) return obj.cast<esg::DType>();
  if (py::isinstance<py::str>(obj)) {
    const std::string name = obj.cast<std::string>();
    std::string names;
    for (esg::DType t : all_dtypes()) {
      if (name == esg::dtype_name(t)) return t;
      names += std::string(" ") + esg::dtype_name(t);
    }
    throw esg::InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, "unknown dtype '" + name + "'; dtypes:" + names);
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
  throw esg::AttributeError(ESG_ERR_ATTRIBUTE, std::string(op) + ": `" + attr + "` is '" + value + "'; valid: " + valid);
}

namespace {

bool is_float(esg::DType t) { return t == esg::f32 || t == esg::f16 || t == esg::bf16 || t == esg::f64; }
bool is_integer(esg::DType t) { return !is_float(t) && t != esg::DType::Bool; }

// Whether the finite `v` becomes ±inf in float dtype `t` (rounded to nearest).
bool overflows(double v, esg::DType t) {
  if (!std::isfinite(v) || t == esg::f64) return false;
  const float f = static_cast<float>(v);
  if (std::isinf(f)) return true;
  if (t == esg::f16) return std::fabs(v) >= 65520.0;  // half's largest is 65504; from 65520 on it rounds to inf
  if (t == esg::bf16) {  // round to nearest even on the upper 16 bits; an all-ones exponent is inf
    uint32_t bits = 0;
    std::memcpy(&bits, &f, 4);
    bits += 0x7FFF + ((bits >> 16) & 1);
    return (bits & 0x7F800000) == 0x7F800000;
  }
  return false;
}

[[noreturn]] void does_not_fit(const std::string& value, esg::DType t) {
  throw esg::DTypeError(ESG_ERR_DTYPE, value + " does not fit in " + esg::dtype_name(t) + ": it would become infinite");
}

// A Python number as a finite value of float dtype `t`, or an error naming it.
double float_scalar(py::handle obj, esg::DType t) {
  const double v = PyFloat_AsDouble(obj.ptr());  // an int beyond double raises OverflowError
  if (v == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    does_not_fit(py::repr(obj).cast<std::string>(), t);
  }
  if (overflows(v, t)) does_not_fit(py::repr(obj).cast<std::string>(), t);
  return v;
}

// Exact bytes of a Python int in an integer dtype, or an error naming the range.
esg::Tensor int_scalar(esg::GraphBuilder& b, esg::DType t, py::handle obj) {
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(obj.ptr(), &overflow);
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  long long lo = 0, hi = 0;
  switch (t) {
    case esg::DType::I8: lo = INT8_MIN, hi = INT8_MAX; break;
    case esg::DType::I16: lo = INT16_MIN, hi = INT16_MAX; break;
    case esg::DType::I32: lo = INT32_MIN, hi = INT32_MAX; break;
    case esg::DType::I64: lo = INT64_MIN, hi = INT64_MAX; break;
    case esg::DType::U8: lo = 0, hi = UINT8_MAX; break;
    case esg::DType::U16: lo = 0, hi = UINT16_MAX; break;
    case esg::DType::U32: lo = 0, hi = UINT32_MAX; break;
    case esg::DType::U64: lo = 0, hi = INT64_MAX; break;  // and beyond, below
    default: break;
  }
  if (t == esg::DType::U64 && overflow > 0) {  // above int64: only u64 holds it
    const unsigned long long u = PyLong_AsUnsignedLongLong(obj.ptr());
    if (PyErr_Occurred()) {
      PyErr_Clear();
      throw esg::DTypeError(ESG_ERR_DTYPE, py::repr(obj).cast<std::string>() + " does not fit in u64 (range 0 .. 18446744073709551615)");
    }
    return b.constant(t, {}, &u, 8);
  }
  if (overflow || v < lo || v > hi)
    throw esg::DTypeError(ESG_ERR_DTYPE, py::repr(obj).cast<std::string>() + " does not fit in " + esg::dtype_name(t) +
                                             " (range " + std::to_string(lo) + " .. " +
                                             (t == esg::DType::U64 ? "18446744073709551615" : std::to_string(hi)) + ")");
  unsigned char bytes[8];
  const size_t n = esg_dtype_size(static_cast<esg_dtype>(t));
  const int64_t wide = v;
  if (n == 1) { const int8_t x = static_cast<int8_t>(wide); std::memcpy(bytes, &x, 1); }
  else if (n == 2) { const int16_t x = static_cast<int16_t>(wide); std::memcpy(bytes, &x, 2); }
  else if (n == 4) { const int32_t x = static_cast<int32_t>(wide); std::memcpy(bytes, &x, 4); }
  else std::memcpy(bytes, &wide, 8);
  return b.constant(t, {}, bytes, n);
}

}  // namespace

std::string text_arg(py::handle obj, const char* what) {
  if (!PyUnicode_Check(obj.ptr())) throw py::type_error(std::string(what) + " must be a str, got " + py::repr(obj).cast<std::string>());
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(obj.ptr(), &size);
  if (!utf8) {
    PyErr_Clear();
    throw esg::InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, std::string(what) + " " + py::repr(obj).cast<std::string>() +
                                                                  " is not valid text: it holds a lone surrogate, which UTF-8 cannot encode");
  }
  return std::string(utf8, static_cast<size_t>(size));
}

py::dtype numpy_dtype_of(esg::DType dtype) {
  if (dtype == esg::bf16) throw esg::DTypeError(ESG_ERR_DTYPE, "numpy has no bf16; cast the graph's bf16 values to f32 for numpy");
  static const char* kNumpy[] = {"",      "float32", "float16", "",       "float64", "int8",   "int16",
                                 "int32", "int64",   "uint8",   "bool",   "uint16",  "uint32", "uint64"};
  return py::dtype(kNumpy[static_cast<int>(dtype)]);
}

py::array make_numpy(const py::array& a, esg::DType dtype) {
  return py::array::ensure(a.attr("astype")(numpy_dtype_of(dtype)), py::array::c_style);
}

esg::Tensor make_constant(esg::GraphBuilder& b, py::handle obj, std::optional<esg::DType> dtype) {
  py::array arr = py::array::ensure(obj, py::array::c_style | py::array::forcecast);
  if (!arr) throw py::type_error("cannot turn " + py::repr(obj).cast<std::string>() + " into a tensor");
  // Python's floats (and lists of them) are f32 constants; numpy's arrays and its scalars that
  // are not Python floats (np.float16(0.5), np.float32(1)) keep their dtype.
  if (!dtype && !py::isinstance<py::array>(obj) && arr.dtype().kind() == 'f' &&
      (PyFloat_Check(obj.ptr()) || !PyObject_HasAttrString(obj.ptr(), "dtype")))
    dtype = esg::f32;
  if (dtype) {
    // A finite value the conversion makes infinite (1e300 into f32) is refused, naming it
    // (numpy's own overflow warning silenced: the error says it).
    const bool checked = is_float(*dtype) && std::string("fiu").find(arr.dtype().kind()) != std::string::npos;
    const py::module_ np = py::module_::import("numpy");
    py::object quiet = np.attr("errstate")(py::arg("over") = "ignore");
    quiet.attr("__enter__")();
    py::array converted;
    try {
      converted = make_numpy(arr, *dtype);
    } catch (...) {
      quiet.attr("__exit__")(py::none(), py::none(), py::none());
      throw;
    }
    quiet.attr("__exit__")(py::none(), py::none(), py::none());
    if (checked) {
      const py::array bad = np.attr("logical_and")(np.attr("isfinite")(arr), np.attr("isinf")(converted));
      if (bad.attr("any")().cast<bool>())
        does_not_fit(py::repr(arr.attr("flat")[np.attr("argmax")(bad)]).cast<std::string>(), *dtype);
    }
    if (is_integer(*dtype) && arr.size() > 0 && (arr.dtype().kind() == 'i' || arr.dtype().kind() == 'u')) {
      // An integer beyond the dtype's range would wrap (2**40 + 5 into i32 is 5): refused, naming
      // it, as a Python int is. The extremes compared as Python ints: exact for every pair of types.
      const py::object range = np.attr("iinfo")(converted.dtype());
      const py::object low = range.attr("min"), high = range.attr("max");
      for (const char* end : {"min", "max"}) {
        const py::int_ value(arr.attr(end)());
        if (value < low || value > high)
          throw esg::DTypeError(ESG_ERR_DTYPE, py::repr(value).cast<std::string>() + " does not fit in " + esg::dtype_name(*dtype) +
                                                   " (range " + py::str(low).cast<std::string>() + " .. " + py::str(high).cast<std::string>() + ")");
      }
    }
    arr = converted;
  }
  const std::optional<esg::DType> t = numpy_dtype(arr.dtype());
  if (!t) throw esg::DTypeError(ESG_ERR_DTYPE, "numpy dtype " + py::str(arr.dtype()).cast<std::string>() + " has no esgraph dtype");
  std::vector<int64_t> shape(arr.shape(), arr.shape() + arr.ndim());
  return b.constant(*t, shape, arr.data(), static_cast<size_t>(arr.nbytes()));
}

namespace {

// Drops the graph's reference to an array it read in place. The last graph or model to let go
// may do so on any thread, or after the interpreter has finished: then the reference is left.
void release_array(void* array) {
#if PY_VERSION_HEX >= 0x030D0000
  if (!Py_IsInitialized() || Py_IsFinalizing()) return;
#else
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
#endif
  py::gil_scoped_acquire gil;
  Py_DECREF(static_cast<PyObject*>(array));
}

[[noreturn]] void not_in_place(const std::string& why) {
  throw esg::InvalidArgumentError(ESG_ERR_INVALID_ARGUMENT, "constant(copy=False): " + why);
}

}  // namespace

esg::Tensor make_constant_in_place(esg::GraphBuilder& b, py::handle obj, std::optional<esg::DType> dtype) {
  if (!py::isinstance<py::array>(obj))
    not_in_place("reads a numpy array in place, got " + py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>());
  const auto arr = py::reinterpret_borrow<py::array>(obj);
  const std::optional<esg::DType> t = numpy_dtype(arr.dtype());
  if (!t) not_in_place("numpy dtype " + py::str(arr.dtype()).cast<std::string>() + " has no esgraph dtype");
  if (dtype && *dtype != *t)
    not_in_place("the array holds " + py::str(arr.dtype()).cast<std::string>() + ", not " + esg::dtype_name(*dtype) +
                 ": an array is read as it is, never converted (copy it, or pass its own dtype)");
  if (arr.writeable())
    not_in_place("the array is writeable, so it could change under the graph; make it read-only (a.setflags(write=False)) "
                 "to promise it will not");
  if (!(arr.flags() & py::array::c_style)) not_in_place("the array is not C-contiguous");
  std::vector<int64_t> shape(arr.shape(), arr.shape() + arr.ndim());
  PyObject* keep = arr.ptr();
  Py_INCREF(keep);  // given up by release_array, also when the constant is refused
  return b.constant_in_place(*t, shape, arr.data(), static_cast<size_t>(arr.nbytes()), release_array, keep);
}

Lift::Lift(std::initializer_list<Arg> args, Arg seq) {
  for (const Arg& a : args) consider(a.obj, a.type);
  if (seq.obj && py::isinstance<py::sequence>(seq.obj) && !py::isinstance<py::str>(seq.obj))
    for (py::handle a : seq.obj.cast<py::sequence>()) consider(a, seq.type);
}

void Lift::consider(py::handle obj, ArgType type) {
  const PyTensor* t = as_tensor(obj);
  if (!t) return;
  if (!owner_) owner_ = t->owner;
  if (type.type_var >= 0 && !like_[type.type_var]) like_[type.type_var] = t->t;
}

esg::GraphBuilder& Lift::builder() {
  if (!owner_) {
    if (builder_stack().empty())
      throw py::value_error("no builder: call this inside `with esgraph.GraphBuilder() as b:` or pass a Tensor");
    owner_ = builder_stack().back();
  }
  return owner_->b;
}

esg::Tensor Lift::operator()(py::handle obj, ArgType type) {
  if (const PyTensor* t = as_tensor(obj)) return t->t;
  if (obj.is_none()) throw py::type_error("None is not a tensor");
  esg::GraphBuilder& b = builder();
  const std::optional<esg::Tensor>& like = type.type_var >= 0 ? like_[type.type_var] : std::nullopt;
  std::optional<esg::DType> hint;
  if (like) hint = like->dtype();
  else if (static_cast<int>(type.fixed) != 0) hint = type.fixed;
  if (!hint) return make_constant(b, obj, std::nullopt);
  const esg::DType t = *hint;
  // Python scalars: exact for integers (range-checked), any number for floats.
  if (py::isinstance<py::bool_>(obj) || py::isinstance<py::int_>(obj) || py::isinstance<py::float_>(obj)) {
    const bool is_f = py::isinstance<py::float_>(obj), is_b = py::isinstance<py::bool_>(obj);
    if (t == esg::boolean && !is_b)
      throw esg::DTypeError(ESG_ERR_DTYPE, "cannot use " + py::repr(obj).cast<std::string>() + " where a bool tensor goes");
    if (is_f && !is_float(t))
      throw esg::DTypeError(ESG_ERR_DTYPE, "cannot combine the float " + py::repr(obj).cast<std::string>() + " with a " +
                                               esg::dtype_name(t) + " tensor; cast the tensor first");
    if (t == esg::boolean) {
      const unsigned char byte = obj.cast<bool>();
      return b.constant(t, {}, &byte, 1);
    }
    if (!is_float(t)) return int_scalar(b, t, obj);
    const double v = float_scalar(obj, t);
    return like ? like->scalar(v) : make_constant(b, py::float_(v), t);
  }
  // Array-likes take the slot's dtype when the conversion keeps their kind.
  const py::array arr = py::array::ensure(obj);
  const char kind = arr ? arr.dtype().kind() : 0;
  const bool fits = kind == 'b' ? true : (kind == 'i' || kind == 'u') ? t != esg::boolean : kind == 'f' ? is_float(t) : false;
  return make_constant(b, obj, fits ? hint : std::nullopt);
}

std::vector<esg::Tensor> Lift::all(py::handle seq, ArgType type) {
  if (!py::isinstance<py::sequence>(seq) || py::isinstance<py::str>(seq))
    throw py::type_error("expected a list of tensors, got " + py::repr(seq).cast<std::string>());
  std::vector<esg::Tensor> out;
  for (py::handle item : seq.cast<py::sequence>()) out.push_back((*this)(item, type));
  return out;
}

std::vector<esg::Tensor> Lift::results(py::handle r, const std::vector<esg::DType>& types) {
  auto type_of = [&](size_t i) { return ArgType{-1, i < types.size() ? types[i] : static_cast<esg::DType>(0)}; };
  if (!py::isinstance<py::list>(r) && !py::isinstance<py::tuple>(r)) return {(*this)(r, type_of(0))};
  std::vector<esg::Tensor> out;
  size_t i = 0;
  for (py::handle item : r.cast<py::sequence>()) out.push_back((*this)(item, type_of(i++)));
  return out;
}

py::object Lift::wrap(const esg::Tensor& t) const { return to_python(PyTensor{t, owner_}); }

py::object Lift::wrap(const std::vector<esg::Tensor>& ts) const {
  py::list out;
  for (const esg::Tensor& t : ts) out.append(wrap(t));
  return std::move(out);
}

}  // namespace esgraph_py
