// What CANN's ELF loader reads of a kernel binary before it runs anything (hicann runtime
// v8.5.0, src/runtime/feature/src/kernel/elf.cc), read the same way from a simulated binary:
// its ELF type, its kernels, and each kernel's `.ascend.meta.<kernel>` record.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace aclsim {

// The kernel types of a `.ascend.meta.<kernel>` record (the runtime's KERNEL_FUNCTION_TYPE_*,
// asc-devkit's K_TYPE_*): 0 is no type, and 8 and above are invalid.
enum KernelType : uint32_t { kTypeNone = 0, kTypeAiCore = 1, kTypeAic = 2, kTypeAiv = 3, kTypeEnd = 8 };

struct KernelImage {
  bool relocatable = false;           // ET_REL: compiled, never linked
  std::vector<std::string> kernels;   // the global, visible functions: what the loader calls kernels
  std::map<std::string, uint32_t> records;  // kernel -> the kernel type of its meta record (kTypeNone without one)
};

// Reads the binary at `path`; an empty string, or the reason it is not a well-formed ELF file.
// `skip` is a global function of the binary that is not a kernel (the simulator's block hook).
std::string read_kernel_image(const std::string& path, const std::string& skip, KernelImage* out);

}  // namespace aclsim
