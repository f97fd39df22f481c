// The CPU backend's options (runtime::BackendOption): declared once, read by the backend's
// rules and by the program that runs a plan.
#pragma once
#include <vector>

#include "cpu/integer_gemm.hpp"
#include "runtime/backend.hpp"
#include "runtime/compile_options.hpp"

namespace esg::cpu {

std::vector<runtime::BackendOption> backend_options();

// The integer GEMM's kernel that option `vnni` chose: the machine's best by default, and what a
// compiled-model file was compiled for once loaded (its packed weights are that kernel's).
integer_gemm::Kernel integer_kernel(const runtime::CompileOptions& options);

}  // namespace esg::cpu
