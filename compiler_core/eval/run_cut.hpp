// Runs a graph cut before its ops sized by data (ir/cut.hpp): each stage by the caller's
// `StageRun` (the reference evaluator, or a compiled model), each such op by its kernel
// (sized_kernels.hpp) between stages, with the sizes the stages before it came to.
#pragma once
#include <functional>
#include <vector>

#include "eval/host_tensor.hpp"
#include "eval/run_control.hpp"
#include "ir/cut.hpp"

namespace esg::eval {

// Runs stage `k`'s graph on `inputs` (in its input order) and returns its outputs.
using StageRun = std::function<std::vector<HostTensor>(size_t k, const std::vector<TensorRef>& inputs)>;

// The outputs of `g`, which `cut` was made from, for `inputs` (checked by the caller). `control`
// is checked before every stage and sized op: a cancel between them stops the run too.
std::vector<HostTensor> run_cut(const ir::Graph& g, const ir::Cut& cut, const std::vector<TensorRef>& inputs, const StageRun& stage,
                                const RunControl& control);

}  // namespace esg::eval
