// The kernels of ops whose output sizes only running them tells (ir::OpSchema::sized_by_data):
// nonzero, unique, non_max_suppression, and the ops with a static form (reshape_to runs as
// reshape with its `shape` read, ...). Each returns its outputs, allocated at the sizes it
// found; a run (eval::run_cut) stops before such an op, runs it here on the host, and plans what
// follows for those sizes.
#pragma once
#include <vector>

#include "eval/host_tensor.hpp"
#include "eval/kernels.hpp"
#include "eval/run_control.hpp"

namespace esg::eval {

// `call.out` is empty: the kernel makes its outputs, within `control`'s memory cap where their
// size is not bounded by the inputs'.
using SizedKernel = std::vector<HostTensor> (*)(const KernelCall& call, const RunControl& control);

// nullptr for an op whose sizes its inputs' shapes tell.
SizedKernel find_sized_kernel(const ir::OpSchema& op);

}  // namespace esg::eval
