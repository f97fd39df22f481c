// One f32 softmax row, shared by the softmax kernel (normalize.cpp) and attention's
// (attention.cpp): dst = softmax(scale · src + mask) over n elements. `mask` is null, one value
// per element (`mask_step` 1) or one for the row (0). dst may be src itself (in place), not a
// part of it.
#pragma once
#include <cstdint>

namespace esg::cpu {

void softmax_row(const float* src, float scale, const float* mask, int64_t mask_step, float* dst, int64_t n);

}  // namespace esg::cpu
