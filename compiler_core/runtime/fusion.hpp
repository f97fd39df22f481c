// Elementwise fusion: connected elementwise ops over one iteration space run as one kernel, tile
// by tile, so their intermediates never reach memory. Each op's math is the function generated
// from its YAML `compute:`, the same the unfused kernel calls: an all-f32 group runs the CPU
// backend's f32 rows, any other group the reference's double/int64 math with results rounded to
// each intermediate's dtype. Either way a fused group computes exactly what the unfused ops would.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "cpu/conv.hpp"
#include "cpu/elementwise_f32.hpp"
#include "eval/elementwise.hpp"
#include "eval/host_tensor.hpp"
#include "ir/graph.hpp"

namespace esg::runtime {

// One member of a group, bound when the group is found so that a run looks nothing up.
struct FusedStep {
  enum class From : uint8_t { Input, Step, Head };
  struct Operand {
    From from;     // a group input, an earlier member's result, or the head's
    size_t index;  // into FusedGroup::inputs, or the step's position
  };
  // Scalar multiply-adds folded into an f32 step from the members around it (see
  // FusedGroup::f32_steps): x·scale + shift, the scale and shift read from single-element group
  // inputs when the group runs (-1: none, so 1 and -0), the scale negated for `s - x`.
  struct Stage {
    int scale = -1, shift = -1;
    bool negate_scale = false, negate_shift = false;
    bool empty() const { return scale < 0 && shift < 0 && !negate_scale; }
  };
  const eval::ElementwiseFn* fn;
  cpu::RowF32 row_f32;  // its f32 row, or nullptr
  cpu::RowAffineF32 row_affine = nullptr;  // the same with stages (pre only for one-input ops)
  Stage pre, post;                         // on its operand, on its result
  std::vector<Operand> operands;
  std::vector<double> attrs;
  std::vector<float> attrs_f32;
  ir::DType dtype;
  bool floating;    // computes in double (any float operand or result), else in int64
  int output = -1;  // position in FusedGroup::outputs, or -1
  size_t slot = 0;  // f32 groups: the tile its results go to, shared with steps whose results died
  bool staged() const { return !pre.empty() || !post.empty(); }
};

struct FusedGroup {
  std::vector<ir::NodeId> members;  // in creation (topological) order, the head first
  ir::NodeId head = ir::kNone;      // a matmul or convolution whose result only the group reads, or none
  std::vector<ir::ValueId> inputs;  // read from outside the group
  std::vector<ir::ValueId> outputs; // used outside the group or graph outputs
  ir::Shape shape;                  // the iteration space: every member's output shape
  std::vector<FusedStep> steps;     // one per member
  // Runs on f32 rows: every member but the head is an op the f32 kernel serves.
  bool f32 = false;
  // What the f32 rows run: `steps` with each multiply, add or subtract by a single-element
  // input folded into the member before it (as a stage on its result) or the one-input member
  // after it (on its operand), when no one else reads the value between. A chain such as
  // sigmoid(tanh(x·a + b)·c + d)·e runs as two rows; each stage rounds as the unfused op does.
  std::vector<FusedStep> f32_steps;
  std::vector<cpu::OperandLayout> layouts;  // per input (Direct for inputs only the head reads)
  std::vector<char> read_by_steps;          // per input: read by a row of f32_steps
  size_t slots = 0;                         // tiles of results a chunk needs (see FusedStep::slot)
  int64_t run = 1;                          // see cpu::plan_operands
  // The head, bound: which kernel computes its blocks and where its operands are in `inputs`.
  enum class HeadKind : uint8_t { Matmul, Conv2d } head_kind = HeadKind::Matmul;
  size_t head_a = 0, head_b = 0;  // matmul: A and B; conv2d: the images and the filters
  int head_bias = -1;             // conv2d's bias, if it has one
  bool head_transpose_b = false;
  cpu::ConvParams head_conv{};
};

// The explicit limits of a group: a fused kernel keeps a tile of every member's results.
constexpr int kMaxGroupOps = 32;
constexpr int64_t kTileElements = 512;  // of the double/int64 path; the f32 one uses cpu::kChunk
// A matmul head's rows per block: as many whole rows as fit this many elements (64 KB), but at
// least kHeadMinRows, so that each GEMM call has rows enough to pay for packing B. A convolution
// head's block is one image's result.
constexpr int64_t kHeadBlockElements = 16 * 1024;
constexpr int64_t kHeadMinRows = 64;

// Groups of two or more elementwise ops of region 0. An op joins its producer's group when
// every consumer of the producer's value is an elementwise op of the same shape (so the value
// stays inside), the value is not a graph output, and no path leaves the group and comes back.
// An f32 group (or a single f32 op) also takes in a matmul or an ungrouped convolution whose
// result only it reads, as its head: the group is then that op's epilogue, run block by block on
// the head's results while they are in cache (a block of rows of a matmul, an image of a
// convolution).
// What a backend wants grouped. The CPU takes heads and leaves single ops to their own kernels;
// a device backend that launches generated kernels wants every elementwise op in a group (of
// one, when it fuses with nothing) and runs matmuls and convolutions on its own library.
struct GroupingOptions {
  bool heads = true;
  // Ops the CPU's f32 rows serve fuse only with each other there, so that a value computes
  // alike fused and unfused; a backend whose kernels convert types at their edges and round
  // each member's result to its dtype groups across types.
  bool mixed_types = false;
  // The backend's own rewrites before grouping: what its kernels and libraries cannot take as
  // the graph states it, restated with ops they can (e.g. ascend::lower_for_device). Unset: none.
  std::function<std::unique_ptr<ir::Graph>(const ir::Graph&)> lower;
  // The elementwise ops the backend's kernels compute (unset: all); the others are left out of
  // every group, to run on their own (a device's operator library takes integer ones).
  std::function<bool(const ir::Graph&, const ir::Node&)> kernel_takes;
  bool single_ops = false;
  int max_ops = kMaxGroupOps;  // 1: no fusion
};
std::vector<FusedGroup> find_groups(const ir::Graph& g, const GroupingOptions& options = {});

// Runs a group: `in` and `out` follow group.inputs and group.outputs. An f32 group of many
// elements spreads its chunks over `parallel`'s threads.
void run_group(const FusedGroup& group, const std::vector<const eval::TensorRef*>& in,
               const std::vector<const eval::TensorRef*>& out, const eval::Parallel* parallel = nullptr);

}  // namespace esg::runtime
