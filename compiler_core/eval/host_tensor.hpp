// Tensors in host memory, row-major: TensorRef points at bytes owned elsewhere (a caller's
// buffer, a model's arena); HostTensor owns its bytes. Kernels work on refs.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
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

// Bytes that a resize leaves as they are: a tensor about to be written whole (a run's output)
// is not zeroed first, which for a large one costs as much as writing it.
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <class U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using Bytes = std::vector<uint8_t, UninitializedAllocator<uint8_t>>;

struct HostTensor {
  ir::DType dtype = ir::DType::F32;
  ir::Shape shape;
  Bytes bytes;

  struct Uninitialized {};

  HostTensor() = default;
  // Zeroed.
  HostTensor(ir::DType t, const ir::Shape& s) : HostTensor(t, s, Uninitialized{}) { std::fill(bytes.begin(), bytes.end(), uint8_t{0}); }
  // For a tensor the caller writes whole.
  HostTensor(ir::DType t, const ir::Shape& s, Uninitialized)
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
// does (floats truncate toward zero into integers and saturate to their range, NaN gives 0,
// anything non-zero is true).
double load_f(const TensorRef& t, int64_t i);
int64_t load_i(const TensorRef& t, int64_t i);
void store_f(const TensorRef& t, int64_t i, double v);
void store_i(const TensorRef& t, int64_t i, int64_t v);

// The values an integer dtype holds (int64's for i64 and the non-integer dtypes; u64 is not
// asked: its top half is beyond int64).
struct IntRange {
  int64_t min, max;
};
IntRange int_range(ir::DType t);
inline double load_f(const HostTensor& t, int64_t i) { return load_f(t.ref(), i); }
inline int64_t load_i(const HostTensor& t, int64_t i) { return load_i(t.ref(), i); }
inline void store_f(HostTensor& t, int64_t i, double v) { store_f(t.ref(), i, v); }
inline void store_i(HostTensor& t, int64_t i, int64_t v) { store_i(t.ref(), i, v); }

}  // namespace esg::eval
