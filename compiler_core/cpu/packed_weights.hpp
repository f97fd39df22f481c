// Constant weights packed into a primitive's layout (a convolution's filters, a product's
// weights): packed once while a plan is lowered, and kept by the program as the backend's
// artifacts (runtime::Artifacts), which a compiled-model file stores, so that lowering a loaded
// plan takes them back, in place in the file's mapping, instead of packing them again. Launches
// that pack the same constant bytes into the same layout share one packed copy (the 64 steps of
// a recurrent layer unrolled read one copy of its weights, which stays in cache, not 64): in
// the program, in the file (whose constants are kept once) and after a load.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include <oneapi/dnnl/dnnl_types.h>

#include "ir/bytes.hpp"

namespace esg::cpu {

// What packed bytes are made of: the constant's first byte read and a description of the
// packing (the layout, and anything else that changes the bytes), which together decide them.
struct PackedFrom {
  const void* source = nullptr;
  std::string layout;  // empty: not shared
};

// The packed bytes of the launch being lowered, its piece `piece`: `size` bytes that `pack`
// fills from `from`, or those another launch already made from the same, or the loaded ones
// when they have that size.
using PackWeights = std::function<ir::Blob(int piece, size_t size, const PackedFrom& from, const std::function<void(uint8_t*)>& pack)>;

// oneDNN's memory descriptor as text, every field that places an element: a PackedFrom's layout
// (empty, not shared, for formats other than blocked ones).
std::string layout_text(const dnnl_memory_desc_t& d);

}  // namespace esg::cpu
