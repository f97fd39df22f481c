// Constant weights packed into a primitive's layout (a convolution's filters, a product's
// weights): packed once while a plan is lowered, and kept by the program as the backend's
// artifacts (runtime::Artifacts), which a compiled-model file stores, so that lowering a loaded
// plan takes them back, in place in the file's mapping, instead of packing them again.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

#include "ir/bytes.hpp"

namespace esg::cpu {

// The packed bytes of the launch being lowered, its piece `piece`: `size` bytes that `pack`
// fills, or the loaded ones when they have that size.
using PackWeights = std::function<ir::Blob(int piece, size_t size, const std::function<void(uint8_t*)>& pack)>;

}  // namespace esg::cpu
