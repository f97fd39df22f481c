// The CPU's kernel for a fused group (runtime/grouping.hpp): its members run tile by tile, so
// their intermediates never reach memory. Each op's math is the function generated from its
// YAML `compute:`, the same the unfused kernel calls: an all-f32 group runs the f32 rows
// (elementwise_f32.hpp), any other group the reference's double/int64 math with results rounded
// to each intermediate's dtype. Either way a fused group computes exactly what the unfused ops
// would (a convolution's group run as oneDNN post-ops instead matches to rounding:
// conv_epilogue.hpp).
#pragma once
#include <algorithm>
#include <vector>

#include "cpu/elementwise_f32.hpp"
#include "cpu/matmul_primitive.hpp"
#include "eval/host_tensor.hpp"
#include "schedule/format.hpp"
#include "runtime/grouping.hpp"

namespace esg::cpu {

// The CPU's grouping rules: f32-row ops fuse only with each other, and a matmul or an f32
// convolution whose result only an f32 group reads heads it (the group is its epilogue).
runtime::GroupingRules grouping_rules();

// A member on the f32 rows.
struct F32Step {
  // Scalar multiply-adds folded into the step from the members around it (see
  // FusedKernel::f32_steps): x·scale + shift, the scale and shift read from single-element group
  // inputs when the group runs (-1: none, so 1 and -0), the scale negated for `s - x`.
  struct Stage {
    int scale = -1, shift = -1;
    bool negate_scale = false, negate_shift = false;
    bool empty() const { return scale < 0 && shift < 0 && !negate_scale; }
  };
  RowF32 row = nullptr;
  RowAffineF32 row_affine = nullptr;  // the same with stages (pre only for one-input ops)
  Stage pre, post;                    // on its operand, on its result
  std::vector<runtime::GroupStep::Operand> operands;
  std::vector<float> attrs;
  ir::DType dtype;
  int output = -1;  // position in FusedGroup::outputs, or -1
  size_t slot = 0;  // the tile its results go to, shared with steps whose results died
  bool staged() const { return !pre.empty() || !post.empty(); }
};

struct FusedKernel {
  const runtime::FusedGroup* group = nullptr;
  // The iteration space: the group's shape, as it lies in memory in the group's format
  // (Format::physical_shape).
  ir::Shape shape;
  // Runs on f32 rows: every member but the head is an op the f32 rows serve.
  bool f32 = false;
  // What the f32 rows run: the group's steps with each multiply, add or subtract by a
  // single-element input folded into the member before it (as a stage on its result) or the
  // one-input member after it (on its operand), when no one else reads the value between. A
  // chain such as sigmoid(tanh(x·a + b)·c + d)·e runs as two rows; each stage rounds as the
  // unfused op does.
  std::vector<F32Step> f32_steps;
  std::vector<OperandLayout> layouts;  // per input (Direct for inputs only the head reads)
  std::vector<char> read_by_steps;     // per input: read by a row of f32_steps
  size_t slots = 0;                    // tiles of results a chunk needs (see F32Step::slot)
  int64_t run = 1;                     // see plan_operands
  // The head, bound. A matmul's rows are computed block by block, from A and B in `inputs`; a
  // convolution's whole result is the caller's (its oneDNN primitive), passed to the run.
  enum class HeadKind : uint8_t { Matmul, Conv2d } head_kind = HeadKind::Matmul;
  size_t head_a = 0, head_b = 0;  // matmul: A and B
  int64_t head_depth = 0;         // matmul: K, the multiply-adds of each of its results
  bool head_transpose_b = false;
  // A matmul head with constant weights on oneDNN's matmul primitive (made by the program for
  // this kernel's blocks of rows), else null: sgemm.
  const MatmulPrimitive* head_primitive = nullptr;
  int64_t head_block_rows = 0;  // a matmul head's rows per block; 0: head_rows_per_block's
};

// The double/int64 path's tile; the f32 one uses kChunk.
constexpr int64_t kTileElements = 512;
// A matmul head's rows per block: as many whole rows as fit this many elements (64 KB), but at
// least kHeadMinRows, so that each GEMM call has rows enough to pay for packing B.
constexpr int64_t kHeadBlockElements = 16 * 1024;
constexpr int64_t kHeadMinRows = 64;
inline int64_t head_rows_per_block(int64_t width) { return std::max(kHeadMinRows, kHeadBlockElements / width); }

// The group's kernel when it computes in `format` and its inputs lie in `input_formats` (empty:
// all row-major): it iterates over, and broadcasts, each value's Format::physical_shape
// (elementwise math does not care where an element lies).
FusedKernel bind_fused_kernel(const ir::Graph& g, const runtime::FusedGroup& group, schedule::Format format = schedule::Format::row_major(),
                              const std::vector<schedule::Format>& input_formats = {});

// Runs a group: `in` and `out` follow group.inputs and group.outputs; a convolution head's
// result is `head_values`, in the group's memory order. An f32 group of many elements spreads
// its chunks over `parallel`'s threads.
void run_fused_kernel(const FusedKernel& kernel, const std::vector<const eval::TensorRef*>& in,
                      const std::vector<const eval::TensorRef*>& out, const eval::Parallel* parallel = nullptr,
                      const float* head_values = nullptr);

}  // namespace esg::cpu
