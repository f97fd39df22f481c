// The CPU backend's fast kernels, where one exists for an op and its dtypes; the compiled model
// falls back to the reference kernels (eval/) for everything else. Same interface as those.
#pragma once
#include "eval/kernels.hpp"
#include "schedule/format.hpp"

namespace esg::cpu {

// A fast kernel for this node, or nullptr.
eval::Kernel find_fast_kernel(const ir::Graph& g, const ir::Node& n);
// A kernel for this node that writes its result in the format `f` (blocked: nChw8c, nChw16c;
// channels last: nhwc, 8-bit max pools), and reads its first input (a concat: all of them) in
// it, or nullptr: what decides which ops the CPU runs outside row-major.
eval::Kernel find_blocked_kernel(const ir::Graph& g, const ir::Node& n, schedule::Format f);

}  // namespace esg::cpu
