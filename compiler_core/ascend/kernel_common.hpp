// What every generator of Ascend C kernels shares (the elementwise groups' in kernel_source,
// the row normalizations' in row_kernel_source): the source a kernel is handed on as, the
// element types and literals of the generated code, its copy helpers and pipe flags, the entry
// named by the hash of the code, and the tiling over the vector cores.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "ir/dtype.hpp"

namespace esg::ascend {

// The Unified Buffer of the vector core the kernels are sized for (Ascend 910B: 192 KiB).
constexpr uint32_t kUnifiedBufferBytes = 192 * 1024;

struct KernelSource {
  std::string entry;  // the kernel's symbol, named by the hash of its code
  std::string code;
  uint32_t tile = 0;  // elements per tile
  size_t num_args = 0;  // inputs, outputs, then the tiling struct
};

// The type a kernel names for values of `t` in global memory (f32, f16, bf16, bool), or nullptr.
const char* element_type(ir::DType t);
// A float as a literal of the generated source (infinities and NaN as compiler builtins).
std::string float_literal(double v);
// The kernels' Load and Store members: whole 32-byte blocks with DataCopy, a tail with DataCopyPad.
std::string copy_helpers();
// A block that orders what pipe A did before it before what pipe B does after it, where no
// queue does: SetFlag and WaitFlag of HardEvent::`event` ("MTE2_S", "S_V", "V_S", ...).
std::string pipe_flag(const char* event);
// The kernel whose class `Kernel` (Init(params..., tiling), Process()) is in `body`: its entry,
// named by the hash of the body, calls them with `args`.
KernelSource finish_kernel(const std::string& body, const std::string& params, const std::string& args, uint32_t tile, size_t num_args);

// The tiling struct the kernels read: elements in all, and per block (whole tiles).
struct Tiling {
  uint64_t total;
  uint64_t per_block;
};

// FNV-1a over `s`, continuing from `seed`: names kernels by their code and keys the cache.
uint64_t content_hash(const std::string& s, uint64_t seed = 1469598103934665603ull);

// Splits `total` elements of `tile`-element tiles over at most `cores` blocks.
Tiling tile_over_cores(uint64_t total, uint32_t tile, uint32_t cores, uint32_t* blocks);

}  // namespace esg::ascend
