// A tensor in host memory: dtype, concrete shape and its bytes, row-major.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "ir/dtype.hpp"
#include "ir/shape.hpp"

namespace esg::eval {

struct HostTensor {
  ir::DType dtype = ir::DType::F32;
  ir::Shape shape;
  std::vector<uint8_t> bytes;

  HostTensor() = default;
  HostTensor(ir::DType t, const ir::Shape& s)
      : dtype(t), shape(s), bytes(static_cast<size_t>(s.num_elements()) * ir::dtype_size(t)) {}
  int64_t size() const { return shape.num_elements(); }
  template <class T>
  T* data() { return reinterpret_cast<T*>(bytes.data()); }
  template <class T>
  const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
};

// Element i as a double or int64, whatever the dtype; and the reverse, converting as a cast
// does (floats truncate toward zero into integers, anything non-zero is true).
double load_f(const HostTensor& t, int64_t i);
int64_t load_i(const HostTensor& t, int64_t i);
void store_f(HostTensor& t, int64_t i, double v);
void store_i(HostTensor& t, int64_t i, int64_t v);

}  // namespace esg::eval
