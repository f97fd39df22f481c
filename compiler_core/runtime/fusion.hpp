// Elementwise fusion: connected elementwise ops over one iteration space run as one kernel, tile
// by tile, so their intermediates never reach memory. Each op's math is the function generated
// from its YAML `compute:`, the same the unfused kernel calls: an all-f32 group runs the CPU
// backend's f32 rows, any other group the reference's double/int64 math with results rounded to
// each intermediate's dtype. Either way a fused group computes exactly what the unfused ops would.
#pragma once
#include <vector>

#include "cpu/elementwise_f32.hpp"
#include "eval/elementwise.hpp"
#include "eval/host_tensor.hpp"
#include "ir/graph.hpp"

namespace esg::runtime {

// One member of a group, bound when the group is found so that a run looks nothing up.
struct FusedStep {
  struct Operand {
    bool from_input;  // a group input (index into inputs) or an earlier member (its step)
    size_t index;
  };
  const eval::ElementwiseFn* fn;
  cpu::RowF32 row_f32;  // its f32 row, or nullptr
  std::vector<Operand> operands;
  std::vector<double> attrs;
  std::vector<float> attrs_f32;
  ir::DType dtype;
  bool floating;    // computes in double (any float operand or result), else in int64
  int output = -1;  // position in FusedGroup::outputs, or -1
};

struct FusedGroup {
  std::vector<ir::NodeId> members;  // in creation (topological) order
  std::vector<ir::ValueId> inputs;  // read from outside the group
  std::vector<ir::ValueId> outputs; // used outside the group or graph outputs
  ir::Shape shape;                  // the iteration space: every member's output shape
  std::vector<FusedStep> steps;     // one per member
  // Runs on f32 rows: every member is an op the f32 kernel serves.
  bool f32 = false;
  std::vector<cpu::OperandLayout> layouts;  // per input
  int64_t run = 1;                          // see cpu::plan_operands
};

// The explicit limits of a group: a fused kernel keeps a tile of every member's results.
constexpr int kMaxGroupOps = 32;
constexpr int64_t kTileElements = 512;  // of the double/int64 path; the f32 one uses cpu::kChunk

// Groups of two or more elementwise ops of region 0. An op joins its producer's group when
// every consumer of the producer's value is an elementwise op of the same shape (so the value
// stays inside), the value is not a graph output, and no path leaves the group and comes back.
std::vector<FusedGroup> find_groups(const ir::Graph& g);

// Runs a group: `in` and `out` follow group.inputs and group.outputs. An f32 group of many
// elements spreads its chunks over `parallel`'s threads.
void run_group(const FusedGroup& group, const std::vector<const eval::TensorRef*>& in,
               const std::vector<const eval::TensorRef*>& out, const eval::Parallel* parallel = nullptr);

}  // namespace esg::runtime
