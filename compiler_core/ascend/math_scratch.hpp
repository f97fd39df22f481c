// The Unified Buffer Ascend C's higher-level math (Tanh, Erf, Power, ...) takes as its
// sharedTmpBuffer on Atlas A2, by CANN's rules (GetXxxMaxMinTmpSize of the Ascend C devkit's
// tiling, isReuseSource false): a buffer of max(per_element · n, floor) + extra bytes computes n
// elements in one pass; any buffer of at least `least` bytes computes them in chunks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace esg::ascend {

struct MathScratch {
  uint32_t per_element, floor, extra, least;
  // Bytes for one pass over n elements.
  uint64_t bytes(uint64_t n) const { return (per_element * n > floor ? per_element * n : floor) + extra; }
};

// The rule of the function `name` on elements of `type_size` bytes (4: float, 2: half), or
// nullptr when it takes no temporary buffer. Power's is that of its tensor-scalar forms, the
// larger.
const MathScratch* math_scratch(const std::string& name, size_t type_size);

}  // namespace esg::ascend
