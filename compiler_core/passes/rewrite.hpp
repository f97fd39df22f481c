// What every rewrite through the builder (ir/replay.hpp) uses, shared by the target-independent
// passes (passes/passes.cpp) and the Ascend backend's legalizations (ascend/legalize.cpp) so that
// neither keeps a copy.
#pragma once
#include <memory>
#include <vector>

#include "eval/host_tensor.hpp"
#include "ir/replay.hpp"

namespace esg::passes {

// The graph rebuilt with `hook` handling the nodes it rewrites; the rest are copied.
std::unique_ptr<ir::Graph> run_pass(const ir::Graph& g, const ir::Replay::Hook& hook);

// Adds an op to the graph a pass builds; its (first) result.
ir::ValueId added(ir::Replay& r, const ir::OpSchema& op, ir::Span<ir::ValueId> inputs, ir::Span<ir::AttrArg> attrs);

// The node's attributes as arguments of an op added to the graph a pass builds (lists point
// into `g`): for a rewrite that keeps them but one or two.
std::vector<ir::AttrArg> attrs_of(const ir::Graph& g, const ir::Node& n);

// The node producing a value of `g`, or nullptr for inputs and parameters.
const ir::Node* producer(const ir::Graph& g, ir::ValueId v);
// A constant of `g` as a tensor over its bytes; one with no bytes when `v` is computed (or kNone).
eval::TensorRef constant_data(const ir::Graph& g, ir::ValueId v);
// The node making `v` if it is a `kind`, else nullptr (also for kNone).
const ir::Node* made_by(const ir::Graph& g, ir::ValueId v, ir::OpKind kind);
// Operand i of node n.
inline ir::ValueId operand(const ir::Graph& g, const ir::Node& n, uint32_t i) { return g.operands[n.first_input + i]; }
// How many times each value of `g` is read (operands, captures included, and graph outputs).
std::vector<uint32_t> use_counts(const ir::Graph& g);
// Node `id` of `g` computed with the reference kernels when its inputs are constants of the
// graph being built, its results added as constants: up to `max_elements` per result, data
// movement at any size no larger than its largest input. False when it is left as it is.
bool fold_node(ir::Replay& r, const ir::Graph& g, ir::NodeId id, int64_t max_elements);
// A transpose's permutation of its `rank` axes, its default (reversed) resolved.
std::vector<int64_t> perm_of(const ir::Graph& g, const ir::Node& transpose, size_t rank);

}  // namespace esg::passes
