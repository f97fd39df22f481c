// Grouping: which connected elementwise ops run as one launch. The pipeline finds the groups
// by a backend's rules (GroupingRules) and binds each member's dataflow once (GroupStep); the
// backend turns a group into its kernel: the CPU's tiled f32 rows or double/int64 tiles
// (cpu/fused_kernel.hpp), Ascend's generated Ascend C kernel (ascend/kernel_source.hpp).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "eval/elementwise.hpp"
#include "ir/graph.hpp"

namespace esg::runtime {

// One member of a group other than its head, bound when the group is found.
struct GroupStep {
  enum class From : uint8_t { Input, Step, Head };
  struct Operand {
    From from;     // a group input, an earlier member's result, or the head's
    size_t index;  // into FusedGroup::inputs, or the step's position
  };
  ir::NodeId node;
  const eval::ElementwiseFn* fn;  // its math, generated from its YAML `compute:`
  std::vector<Operand> operands;
  std::vector<double> attrs;
  ir::DType dtype;
  bool floating;    // computes in double (any float operand or result), else in int64
  int output = -1;  // position in FusedGroup::outputs, or -1
};

struct FusedGroup {
  std::vector<ir::NodeId> members;  // in creation (topological) order, the head first
  ir::NodeId head = ir::kNone;      // a matmul or convolution whose result only the group reads, or none
  std::vector<ir::ValueId> inputs;  // read from outside the group
  std::vector<ir::ValueId> outputs; // used outside the group or graph outputs
  ir::Shape shape;                  // the iteration space: every member's output shape
  std::vector<GroupStep> steps;     // one per member but the head
};

// The explicit limit of a group: a fused kernel keeps a tile of every member's results.
constexpr int kMaxGroupOps = 32;

// What a backend wants grouped.
struct GroupingRules {
  // Ops fuse only with ops of the same domain (unset: one domain): the CPU keeps the ops its f32
  // rows serve apart from the rest, so that a value computes alike fused and unfused.
  std::function<int(const ir::Graph&, const ir::Node&)> domain;
  // Whether `producer` (a single-output op whose result only the group reads) may head a group
  // whose first member is `member`: the group is then its epilogue, run block by block on its
  // results while they are in cache. Unset: no heads.
  std::function<bool(const ir::Graph&, const ir::Node& producer, const ir::Node& member)> can_head;
  // The elementwise ops the backend's kernels compute (unset: all); the others are left out of
  // every group, to run on their own.
  std::function<bool(const ir::Graph&, const ir::Node&)> kernel_takes;
  // A backend that launches only generated kernels wants every elementwise op in a group (of
  // one, when it fuses with nothing); else single ops keep their own kernels.
  bool single_ops = false;
  int max_ops = kMaxGroupOps;  // 1: no fusion
};

// Groups of two or more elementwise ops of region 0 (or one, with `single_ops` or a head). An
// op joins its producer's group when every consumer of the producer's value is an elementwise
// op of the same shape and domain (so the value stays inside), the value is not a graph output,
// and no path leaves the group and comes back.
std::vector<FusedGroup> find_groups(const ir::Graph& g, const GroupingRules& rules = {});

// The group's steps (FusedGroup::steps), bound from its members, inputs and outputs.
std::vector<GroupStep> bind_steps(const ir::Graph& g, const FusedGroup& group);
// Why `group` is not one find_groups could have made by `rules` ("" when it is): what a group
// read from a file is checked against (runtime/plan_record.hpp).
std::string group_problem(const ir::Graph& g, const FusedGroup& group, const GroupingRules& rules);

}  // namespace esg::runtime
