// The CPU backend's fast kernels, where one exists for an op and its dtypes; the compiled model
// falls back to the reference kernels (eval/) for everything else. Same interface as those.
#pragma once
#include "eval/kernels.hpp"

namespace esg::cpu {

// A fast kernel for this node, or nullptr.
eval::Kernel find_fast_kernel(const ir::Graph& g, const ir::Node& n);

}  // namespace esg::cpu
