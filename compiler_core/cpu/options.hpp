// The CPU backend's options (runtime::BackendOption): declared once, read by the backend's
// rules and by the program that runs a plan.
#pragma once
#include <vector>

#include "cpu/integer_gemm.hpp"
#include "runtime/backend.hpp"
#include "runtime/compile_options.hpp"

namespace esg::cpu {

std::vector<runtime::BackendOption> backend_options();

// The integer GEMM's kernel here: VNNI's where option `vnni` allows it and the CPU has it. Not a
// feature of the compiled model's target: a file packed for one kernel loads on a CPU that runs
// the other, whose packed weights never have the same size, so the load packs them again.
integer_gemm::Kernel integer_kernel(const runtime::CompileOptions& options);

}  // namespace esg::cpu
