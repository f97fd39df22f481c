#include "ascend/kernel_common.hpp"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace esg::ascend {

std::string pipe_flag(const char* event) {
  return std::string("{ const event_t e = static_cast<event_t>(GetTPipePtr()->FetchEventID(HardEvent::") + event + ")); SetFlag<HardEvent::" +
         event + ">(e); WaitFlag<HardEvent::" + event + ">(e); }";
}

std::string float_literal(double v) {
  // Builtins both GCC and CANN's clang-based compiler know (clip's default bounds are infinite).
  if (std::isnan(v)) return "__builtin_nanf(\"\")";
  if (std::isinf(v)) return v > 0 ? "__builtin_inff()" : "(-__builtin_inff())";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9gf", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s.insert(s.size() - 1, ".0");
  return s;
}

std::string copy_helpers() {
  return "  // Whole 32-byte blocks move with DataCopy; a tail that is not one with DataCopyPad.\n"
         "  template <class E>\n"
         "  __aicore__ static inline void Load(const LocalTensor<E>& dst, const GlobalTensor<E>& src, uint32_t n) {\n"
         "    if (n * sizeof(E) % 32 == 0) {\n      DataCopy(dst, src, n);\n    } else {\n"
         "      DataCopyExtParams p{1, static_cast<uint32_t>(n * sizeof(E)), 0, 0, 0};\n"
         "      DataCopyPad(dst, src, p, DataCopyPadExtParams<E>{false, 0, 0, 0});\n    }\n  }\n"
         "  template <class E>\n"
         "  __aicore__ static inline void Store(const GlobalTensor<E>& dst, const LocalTensor<E>& src, uint32_t n) {\n"
         "    if (n * sizeof(E) % 32 == 0) {\n      DataCopy(dst, src, n);\n    } else {\n"
         "      DataCopyExtParams p{1, static_cast<uint32_t>(n * sizeof(E)), 0, 0, 0};\n"
         "      DataCopyPad(dst, src, p);\n    }\n  }\n";
}

// The element types the kernels move and compute: f32 and f16 (the vector instructions' own),
// bf16 (moved, computed as f32), and bool, which is one byte (0 or 1) in global memory and a
// tile of 0s and 1s inside the kernel.
const char* element_type(ir::DType t) {
  switch (t) {
    case ir::DType::F32: return "float";
    case ir::DType::F16: return "half";
    case ir::DType::BF16: return "bfloat16_t";
    case ir::DType::Bool: return "uint8_t";
    default: return nullptr;
  }
}

// The kernel's `.ascend.meta.<entry>` record, as CANN's build writes one for each kernel
// (asc-devkit's extract_host_stub.py, FunLevelKType): one type-length-value entry, kernel type
// (F_TYPE_KTYPE = 1, 4 bytes) AIV (K_TYPE_AIV = 3), the vector core. CANN's runtime takes a
// kernel's core from its record when every kernel of a binary has one, and only then ignores the
// .json beside the binary (hicann runtime v8.5.0, elf.cc UpdateKernelsInfo), so the kernel runs on
// the vector core either way. The layout is spelled out rather than taken from the devkit's
// headers, which not every CANN version has.
static std::string vector_core_record(const std::string& entry) {
  return "// Runs on the vector core: the kernel type of its .ascend.meta record.\n"
         "static const struct { unsigned short type, length; unsigned int kernel_type; } " + entry +
         "_meta __attribute__((used, section(\".ascend.meta." + entry + "\"))) = {1, 4, 3};\n";
}

KernelSource finish_kernel(const std::string& body, const std::string& params, const std::string& args, uint32_t tile, size_t num_args) {
  char entry[32];
  std::snprintf(entry, sizeof entry, "esg_%016" PRIx64, content_hash(body));
  KernelSource out;
  out.entry = entry;
  out.code = body + "extern \"C\" __global__ __aicore__ void " + entry + "(" + params + "GM_ADDR tiling) {\n" + "  Kernel k;\n  k.Init(" + args +
             "tiling);\n  k.Process();\n}\n" + vector_core_record(entry);
  out.tile = tile;
  out.num_args = num_args;
  return out;
}

uint64_t content_hash(const std::string& s, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

Tiling tile_over_cores(uint64_t total, uint32_t tile, uint32_t cores, uint32_t* blocks) {
  const uint64_t num_tiles = (total + tile - 1) / tile;
  const uint64_t used = std::max<uint64_t>(1, std::min<uint64_t>(cores, num_tiles));
  const uint64_t per_block = (num_tiles + used - 1) / used * tile;
  *blocks = static_cast<uint32_t>(per_block ? (total + per_block - 1) / per_block : 1);
  if (*blocks == 0) *blocks = 1;
  return {total, per_block};
}

}  // namespace esg::ascend
