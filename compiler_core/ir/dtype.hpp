// Element types. The numeric values equal the C ABI's esg_dtype and the graph file's codes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace esg::ir {

enum class DType : uint8_t {
  Invalid = 0,
  F32 = 1, F16 = 2, BF16 = 3, F64 = 4,
  I8 = 5, I16 = 6, I32 = 7, I64 = 8, U8 = 9,
  Bool = 10,
  U16 = 11, U32 = 12, U64 = 13,
};
constexpr int kNumDTypes = 14;

const char* dtype_name(DType t);        // "f32", …; "invalid" for anything else
size_t dtype_size(DType t);             // bytes per element; 0 for Invalid
bool dtype_valid(DType t);
bool dtype_is_float(DType t);
bool dtype_is_unsigned(DType t);  // u8 … u64
constexpr uint32_t dtype_bit(DType t) { return 1u << static_cast<unsigned>(t); }

}  // namespace esg::ir
