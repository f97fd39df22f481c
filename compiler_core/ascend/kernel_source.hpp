// Ascend C source for a fused elementwise group: one __global__ __aicore__ entry whose blocks
// each take a contiguous run of tiles; per tile CopyIn → Compute → CopyOut through
// double-buffered TQue's in the Unified Buffer; the math of each member is its op's YAML
// `compute:` lowered to vector instructions (ascendc_ops.hpp). Tiling parameters arrive as a
// kernel argument (a device struct), so one binary serves any block count.
#pragma once
#include <cstdint>
#include <string>

#include "ascend/kernel_common.hpp"
#include "ir/graph.hpp"
#include "runtime/grouping.hpp"

namespace esg::ascend {

// The kernel of `group` (whose members are in `g`), or throws ir::Error(Unsupported) naming the
// member, dtype or broadcast the generator does not cover yet.
KernelSource generate_kernel(const ir::Graph& g, const runtime::FusedGroup& group);

// Whether generated kernels compute `n`: every value it reads and writes is of a type they
// move (element_type); the others (integer ops) run through CANN's operator library.
bool kernel_computes(const ir::Graph& g, const ir::Node& n);

// Whether a generated kernel reads an operand of `operand` shape in a group over `group` in
// place: the group's own elements (leading 1s apart), a single element of any type, or a
// trailing block of its dims repeated (a bias row) of f32 (the type of any group with an f32
// value in it) and of at most kMaxResidentRow elements. Other broadcasts are materialized first.
constexpr int64_t kMaxResidentRow = 2048;
bool kernel_reads_broadcast(const ir::Shape& operand, ir::DType dtype, const ir::Shape& group);

}  // namespace esg::ascend
