// Ascend C source for a fused elementwise group: one __global__ __aicore__ entry whose blocks
// each take a contiguous run of tiles; per tile CopyIn → Compute → CopyOut through
// double-buffered TQue's in the Unified Buffer; the math of each member is its op's YAML
// `compute:` lowered to vector instructions (ascendc_ops.hpp). Tiling parameters arrive as a
// kernel argument (a device struct), so one binary serves any block count.
#pragma once
#include <cstdint>
#include <string>

#include "ir/graph.hpp"
#include "runtime/grouping.hpp"

namespace esg::ascend {

// The Unified Buffer of the vector core the kernels are sized for (Ascend 910B: 192 KiB).
constexpr uint32_t kUnifiedBufferBytes = 192 * 1024;

struct KernelSource {
  std::string entry;  // the kernel's symbol, named by the hash of its code
  std::string code;
  uint32_t tile = 0;  // elements per tile
  size_t num_args = 0;  // inputs, outputs, then the tiling struct
};

// The kernel of `group` (whose members are in `g`), or throws ir::Error(Unsupported) naming the
// member, dtype or broadcast the generator does not cover yet.
KernelSource generate_kernel(const ir::Graph& g, const runtime::FusedGroup& group);

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

// Whether generated kernels compute `n`: every value it reads and writes is of a type they
// move (element_type); the others (integer ops) run through CANN's operator library.
bool kernel_computes(const ir::Graph& g, const ir::Node& n);

// Whether a generated kernel reads an operand of `operand` shape in a group over `group` in
// place: the group's own elements (leading 1s apart), a single element of any type, or a
// trailing block of its dims repeated (a bias row) of f32 (the type of any group with an f32
// value in it) and of at most kMaxResidentRow elements. Other broadcasts are materialized first.
constexpr int64_t kMaxResidentRow = 2048;
bool kernel_reads_broadcast(const ir::Shape& operand, ir::DType dtype, const ir::Shape& group);

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
