#include "eval/host_tensor.hpp"

#include <cmath>

#include "ir/half.hpp"

namespace esg::eval {

double load_f(const TensorRef& t, int64_t i) {
  switch (t.dtype) {
    case ir::DType::F32: return t.data<float>()[i];
    case ir::DType::F64: return t.data<double>()[i];
    case ir::DType::F16: return ir::f16_to_float(t.data<uint16_t>()[i]);
    case ir::DType::BF16: return ir::bf16_to_float(t.data<uint16_t>()[i]);
    case ir::DType::U64: return static_cast<double>(t.data<uint64_t>()[i]);
    default: return static_cast<double>(load_i(t, i));
  }
}

int64_t load_i(const TensorRef& t, int64_t i) {
  switch (t.dtype) {
    case ir::DType::I8: return t.data<int8_t>()[i];
    case ir::DType::I16: return t.data<int16_t>()[i];
    case ir::DType::I32: return t.data<int32_t>()[i];
    case ir::DType::I64: return t.data<int64_t>()[i];
    case ir::DType::U8: return t.data<uint8_t>()[i];
    case ir::DType::U16: return t.data<uint16_t>()[i];
    case ir::DType::U32: return t.data<uint32_t>()[i];
    case ir::DType::U64: return static_cast<int64_t>(t.data<uint64_t>()[i]);  // the bits; see load_u
    case ir::DType::Bool: return t.data<uint8_t>()[i] != 0;
    default: return static_cast<int64_t>(load_f(t, i));
  }
}

void store_f(const TensorRef& t, int64_t i, double v) {
  switch (t.dtype) {
    case ir::DType::F32: t.data<float>()[i] = static_cast<float>(v); break;
    case ir::DType::F64: t.data<double>()[i] = v; break;
    case ir::DType::F16: t.data<uint16_t>()[i] = ir::float_to_f16(static_cast<float>(v)); break;
    case ir::DType::BF16: t.data<uint16_t>()[i] = ir::float_to_bf16(static_cast<float>(v)); break;
    case ir::DType::Bool: t.data<uint8_t>()[i] = v != 0; break;
    case ir::DType::U64: t.data<uint64_t>()[i] = std::isnan(v) || v <= 0 ? 0 : v >= 0x1p64 ? UINT64_MAX : static_cast<uint64_t>(v); break;
    default: {
      // Float to integer truncates toward zero and saturates to the dtype's range (NaN gives 0),
      // so a quantized value that leaves its range sticks at the end of it.
      const IntRange r = int_range(t.dtype);
      store_i(t, i, std::isnan(v) ? 0 : v <= static_cast<double>(r.min) ? r.min : v >= static_cast<double>(r.max) ? r.max : static_cast<int64_t>(v));
    }
  }
}

IntRange int_range(ir::DType t) {
  switch (t) {
    case ir::DType::I8: return {INT8_MIN, INT8_MAX};
    case ir::DType::I16: return {INT16_MIN, INT16_MAX};
    case ir::DType::I32: return {INT32_MIN, INT32_MAX};
    case ir::DType::U8: return {0, UINT8_MAX};
    case ir::DType::U16: return {0, UINT16_MAX};
    case ir::DType::U32: return {0, UINT32_MAX};
    default: return {INT64_MIN, INT64_MAX};
  }
}

void store_i(const TensorRef& t, int64_t i, int64_t v) {
  switch (t.dtype) {
    case ir::DType::I8: t.data<int8_t>()[i] = static_cast<int8_t>(v); break;
    case ir::DType::I16: t.data<int16_t>()[i] = static_cast<int16_t>(v); break;
    case ir::DType::I32: t.data<int32_t>()[i] = static_cast<int32_t>(v); break;
    case ir::DType::I64: t.data<int64_t>()[i] = v; break;
    case ir::DType::U8: t.data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
    case ir::DType::U16: t.data<uint16_t>()[i] = static_cast<uint16_t>(v); break;
    case ir::DType::U32: t.data<uint32_t>()[i] = static_cast<uint32_t>(v); break;
    case ir::DType::U64: t.data<uint64_t>()[i] = static_cast<uint64_t>(v); break;
    case ir::DType::Bool: t.data<uint8_t>()[i] = v != 0; break;
    default: store_f(t, i, static_cast<double>(v));
  }
}

}  // namespace esg::eval
