// Turns generated Ascend C into kernel binaries, cached on disk by content hash so that a
// recompile of the same graph compiles nothing. CANN's compiler (ccec) builds device binaries;
// for the simulated device the host compiler builds a shared library against the CPU
// implementation of the Ascend C subset (tests/ascend_sim/include).
#pragma once
#include <string>
#include <vector>

#include "ascend/kernel_source.hpp"

namespace esg::ascend {

// Kernels build in CANN's two steps: compiled to a relocatable object, then linked into the
// binary the runtime loads (its ELF loader applies no relocations: an unlinked call, a second
// text section or a block-local global would land at the wrong address).
struct Toolchain {
  std::string name;                  // "cann" or "simulator"
  std::vector<std::string> command;  // the compiler and its flags; source and "-o object" follow
  std::vector<std::string> link;     // the linker and its flags; the object and "-o binary" follow
  std::string extension;             // of the binaries: ".bin" (an ELF executable) or ".so"
};

// CANN's kernel compiler and Ascend C headers, found under ASCEND_HOME_PATH (or
// ASCEND_TOOLKIT_HOME, or a default install) in CANN 8.5's layout (<root>/<arch>-linux,
// asc/include) or the older one (<root>/compiler, tikcpp/tikcfw), with the flags CANN's own
// build gives vector-core kernels; the arch is ESG_ASCEND_ARCH (default dav-c220-vec, Ascend
// 910B's vector cores), and the linker beside the compiler (ld.lld -m aicorelinux -Ttext=0
// -static, as CANN's build links device code). The binary names no core: build_kernel writes the
// .json beside it.
// Throws ir::Error(Backend) naming where it looked.
Toolchain cann_toolchain();
// The host compiler and the simulator's headers (ESG_ASCEND_SIM_CXX and ESG_ASCEND_SIM_INCLUDE
// override the paths configured at build time).
Toolchain simulator_toolchain();

// The Ascend C core version kernels are built for: ESG_ASCEND_ARCH, default dav-c220-vec.
std::string kernel_arch();
// Why kernels built for `arch` cannot run on the SoC aclrtGetSocName names: empty when they can
// (dav-c220*: Atlas A2/A3, Ascend910B<n>* and Ascend910_93*), or when `arch` is none esgraph
// knows (the user chose it and knows). dav-m200 (Ascend310P) is refused: no DataCopyPad there.
std::string arch_mismatch(const std::string& arch, const std::string& soc);

// The directory of cached binaries: `kernels` in the compile cache when the compile names one
// (`cache`: runtime::cache_dir, the option or ESG_CACHE_DIR), else ESG_KERNEL_CACHE (the older
// name of the same cache), else $XDG_CACHE_HOME/esgraph/kernels, else ~/.cache/esgraph/kernels.
std::string kernel_cache_dir(const std::string& cache);

struct BuiltKernel {
  std::string path;  // absolute
  bool from_cache;
};
// The binary of `source`, compiled unless the cache has it, and beside it `<name>.json` naming
// the vector cores (acl::kVectorCoreMagic) for aclrtBinaryLoadFromFile. Compiler failures throw
// ir::Error(Backend) with the compiler's output.
BuiltKernel build_kernel(const Toolchain& toolchain, const KernelSource& source, const std::string& cache_dir);

}  // namespace esg::ascend
