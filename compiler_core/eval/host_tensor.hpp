// Tensors in host memory, row-major: TensorRef points at bytes owned elsewhere (a caller's
// buffer, a model's arena); HostTensor owns its bytes. Kernels work on refs.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "ir/dtype.hpp"
#include "ir/shape.hpp"

namespace esg::eval {

// memmove of `n` bytes that may be none: an empty tensor's pointer may be null, which memmove
// must not be given even for no bytes.
inline void move_bytes(void* dst, const void* src, size_t n) {
  if (n) std::memmove(dst, src, n);
}

struct TensorRef {
  ir::DType dtype = ir::DType::F32;
  ir::Shape shape;
  uint8_t* bytes = nullptr;

  int64_t size() const { return shape.num_elements(); }
  size_t nbytes() const { return static_cast<size_t>(size()) * ir::dtype_size(dtype); }
  template <class T>
  T* data() const { return reinterpret_cast<T*>(bytes); }
};

struct HostTensor {
  ir::DType dtype = ir::DType::F32;
  ir::Shape shape;
  std::vector<uint8_t> bytes;

  HostTensor() = default;
  HostTensor(ir::DType t, const ir::Shape& s)
      : dtype(t), shape(s), bytes(static_cast<size_t>(s.num_elements()) * ir::dtype_size(t)) {}
  explicit HostTensor(const TensorRef& r) : dtype(r.dtype), shape(r.shape), bytes(r.bytes, r.bytes + r.nbytes()) {}
  int64_t size() const { return shape.num_elements(); }
  template <class T>
  T* data() { return reinterpret_cast<T*>(bytes.data()); }
  template <class T>
  const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
  TensorRef ref() const { return {dtype, shape, const_cast<uint8_t*>(bytes.data())}; }
};

// Element i as a double or int64, whatever the dtype; and the reverse, converting as a cast
// does (floats truncate toward zero into integers, anything non-zero is true).
double load_f(const TensorRef& t, int64_t i);
int64_t load_i(const TensorRef& t, int64_t i);
void store_f(const TensorRef& t, int64_t i, double v);
void store_i(const TensorRef& t, int64_t i, int64_t v);
inline double load_f(const HostTensor& t, int64_t i) { return load_f(t.ref(), i); }
inline int64_t load_i(const HostTensor& t, int64_t i) { return load_i(t.ref(), i); }
inline void store_f(HostTensor& t, int64_t i, double v) { store_f(t.ref(), i, v); }
inline void store_i(HostTensor& t, int64_t i, int64_t v) { store_i(t.ref(), i, v); }

}  // namespace esg::eval
