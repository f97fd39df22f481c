#include "ir/dtype.hpp"

namespace esg::ir {
namespace {
constexpr const char* kNames[kNumDTypes] = {"invalid", "f32", "f16", "bf16", "f64", "i8",  "i16",
                                            "i32",     "i64", "u8",  "bool", "u16", "u32", "u64"};
constexpr size_t kSizes[kNumDTypes] = {0, 4, 2, 2, 8, 1, 2, 4, 8, 1, 1, 2, 4, 8};
}  // namespace

bool dtype_valid(DType t) {
  return static_cast<unsigned>(t) >= 1 && static_cast<unsigned>(t) < kNumDTypes;
}
const char* dtype_name(DType t) { return dtype_valid(t) ? kNames[static_cast<int>(t)] : kNames[0]; }
size_t dtype_size(DType t) { return dtype_valid(t) ? kSizes[static_cast<int>(t)] : 0; }
bool dtype_is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64;
}
bool dtype_is_unsigned(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
}

}  // namespace esg::ir
