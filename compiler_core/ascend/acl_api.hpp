// The part of AscendCL (CANN's runtime, libascendcl.so) the Ascend backend calls, declared here
// from CANN's public documentation so that nothing of CANN is needed to build: the handle
// types, the constants, and one table of the functions, resolved by name at run time.
// Signatures and values: acl/acl.h, acl/acl_base.h and acl/acl_rt.h of CANN 8.x (the open
// runtime's include/external/acl; docs/ascend.md lists the sources).
#pragma once
#include <cstddef>
#include <cstdint>

namespace esg::ascend::acl {

using Error = int;  // aclError
constexpr Error kSuccess = 0;

using Context = void*;    // aclrtContext
using Stream = void*;     // aclrtStream
using Event = void*;      // aclrtEvent
using BinHandle = void*;  // aclrtBinHandle
using FuncHandle = void*; // aclrtFuncHandle
using ModelRI = void*;    // aclmdlRI: a captured stream, replayed as one submission
using ArgsHandle = void*;   // aclrtArgsHandle: a launch's arguments, built on the host
using ParamHandle = void*;  // aclrtParamHandle: one argument in it
struct LaunchKernelCfg;     // aclrtLaunchKernelCfg: launch attributes (none are set)

// A binary says which core its kernels run on by an `.ascend.meta.<kernel>` record for each
// kernel, or else by a `<binary>.json` beside it whose "magic" names the core (a load from memory:
// the magic option); a binary with neither is refused (hicann runtime v8.5.0, binary_loader.cc).
// CANN's own build emits both, and so does kernel_build: the record in the source
// (kernel_common), the .json of the vector cores beside the binary.
constexpr const char* kVectorCoreMagic = "RT_DEV_BINARY_MAGIC_ELF_AIVEC";

// aclrtBinaryLoadFromData's options (aclrtBinaryLoadOptions): a binary loaded from memory has no
// .json beside it, so its core comes as the magic option (hicann runtime's
// aclrtBinaryLoadOptionType, aclrtBinaryLoadOptionValue).
constexpr uint32_t kBinaryLoadOptionMagic = 2;             // ACL_RT_BINARY_LOAD_OPT_MAGIC
constexpr uint32_t kBinaryMagicVectorCore = 0x41415246u;   // ACL_RT_BINARY_MAGIC_ELF_VECTOR_CORE
struct BinaryLoadOption {  // aclrtBinaryLoadOption
  uint32_t type;           // aclrtBinaryLoadOptionType
  union {                  // aclrtBinaryLoadOptionValue
    uint32_t is_lazy_load;
    uint32_t magic;
    int32_t cpu_kernel_mode;
    uint32_t reserved[4];
  } value;
};
struct BinaryLoadOptions {  // aclrtBinaryLoadOptions
  BinaryLoadOption* options;
  size_t count;
};

enum MemcpyKind : int {  // aclrtMemcpyKind
  kHostToHost = 0,
  kHostToDevice = 1,
  kDeviceToHost = 2,
  kDeviceToDevice = 3,
};
enum MallocPolicy : int {  // aclrtMemMallocPolicy
  kHugeFirst = 0,
  kHugeOnly = 1,
  kNormalOnly = 2,
};
// aclrtCreateEventExWithFlag's flags: CANN's cross-stream capture makes its events ACL_EVENT_SYNC.
constexpr uint32_t kEventSync = 0x1u;  // ACL_EVENT_SYNC
enum CaptureMode : int {  // aclmdlRICaptureMode
  kCaptureGlobal = 0,
  kCaptureThreadLocal = 1,
  kCaptureRelaxed = 2,
};

enum DeviceInfo : int32_t {  // aclDeviceInfo: what aclGetDeviceCapability reports
  kAiCoreNum = 0,
  kVectorCoreNum = 1,
  kL2Size = 2,
};

// X(name, return type, parameter list): every function the backend resolves. A stand-in
// library (tests/ascend_sim) implements exactly these.
#define ESG_ACL_FUNCTIONS(X)                                                                            \
  X(aclInit, Error, (const char* config_path))                                                           \
  X(aclFinalize, Error, ())                                                                              \
  X(aclrtGetDeviceCount, Error, (uint32_t * count))                                                      \
  X(aclGetDeviceCapability, Error, (uint32_t device, DeviceInfo info, int64_t * value))                  \
  X(aclrtSetDevice, Error, (int32_t device))                                                             \
  X(aclrtResetDevice, Error, (int32_t device))                                                           \
  X(aclrtCreateContext, Error, (Context * context, int32_t device))                                      \
  X(aclrtDestroyContext, Error, (Context context))                                                       \
  X(aclrtSetCurrentContext, Error, (Context context))                                                    \
  X(aclrtCreateStream, Error, (Stream * stream))                                                         \
  X(aclrtDestroyStream, Error, (Stream stream))                                                          \
  X(aclrtSynchronizeStream, Error, (Stream stream))                                                      \
  X(aclrtCreateEvent, Error, (Event * event))                                                            \
  X(aclrtDestroyEvent, Error, (Event event))                                                             \
  X(aclrtRecordEvent, Error, (Event event, Stream stream))                                               \
  X(aclrtStreamWaitEvent, Error, (Stream stream, Event event))                                           \
  X(aclrtResetEvent, Error, (Event event, Stream stream))                                                \
  X(aclrtMallocAlign32, Error, (void** ptr, size_t size, MallocPolicy policy))                           \
  X(aclrtFree, Error, (void* ptr))                                                                       \
  /* page-locked host memory: what an asynchronous copy may read from or write to */                   \
  X(aclrtMallocHost, Error, (void** ptr, size_t size))                                                   \
  X(aclrtFreeHost, Error, (void* ptr))                                                                   \
  X(aclrtMemcpy, Error, (void* dst, size_t dst_max, const void* src, size_t count, MemcpyKind kind))     \
  X(aclrtMemcpyAsync, Error,                                                                             \
    (void* dst, size_t dst_max, const void* src, size_t count, MemcpyKind kind, Stream stream))          \
  X(aclGetRecentErrMsg, const char*, ())                                                                  \
  X(aclrtGetSocName, const char*, ())

// The kernel API, which generated kernels are loaded and launched through: optional and all or
// nothing, so that a CANN without it (before 8.3, the first release whose documentation covers
// it for AI Core binaries) still runs models of the operator library (aclnn) alone; a model
// with generated kernels is refused there by name.
#define ESG_ACL_KERNEL_FUNCTIONS(X)                                                                     \
  /* path: absolute; options may be null (the core comes from the .json beside the binary) */          \
  X(aclrtBinaryLoadFromFile, Error, (const char* path, void* options, BinHandle* handle))                \
  X(aclrtBinaryGetFunction, Error, (BinHandle handle, const char* kernel_name, FuncHandle* func))        \
  X(aclrtBinaryUnLoad, Error, (BinHandle handle))                                                        \
  /* A launch's arguments, appended one by one into the calling thread's one handle (each Init */      \
  /* starts it anew): built right before the launch that reads them. */                               \
  X(aclrtKernelArgsInit, Error, (FuncHandle func, ArgsHandle * args))                                    \
  X(aclrtKernelArgsAppend, Error, (ArgsHandle args, void* value, size_t size, ParamHandle* param))        \
  X(aclrtKernelArgsFinalize, Error, (ArgsHandle args))                                                   \
  /* cfg may be null; reserve must be */                                                                \
  X(aclrtLaunchKernelWithConfig, Error,                                                                  \
    (FuncHandle func, uint32_t num_blocks, Stream stream, LaunchKernelCfg * cfg, ArgsHandle args, void* reserve))

// The model-capture functions: optional (older CANN lacks them); without them a run replays
// the launch list. A capture spans the streams that wait on an event recorded in it, whose
// events are made with ACL_EVENT_SYNC (CANN's guide to cross-stream capture).
#define ESG_ACL_CAPTURE_FUNCTIONS(X)                                                                    \
  X(aclrtCreateEventExWithFlag, Error, (Event * event, uint32_t flag))                                   \
  X(aclmdlRICaptureBegin, Error, (Stream stream, CaptureMode mode))                                      \
  X(aclmdlRICaptureEnd, Error, (Stream stream, ModelRI * model))                                         \
  X(aclmdlRIExecuteAsync, Error, (ModelRI model, Stream stream))                                         \
  X(aclmdlRIDestroy, Error, (ModelRI model))

// What the installed CANN is, for reports: optional (CANN 8.x; deprecated in 9 for
// aclsysGetVersionStr).
struct CannPackageVersion {  // aclCANNPackageVersion
  char version[128];
  char major[64], minor[64], release[64], patch[64];
  char reserved[128];
};
constexpr int kPackageCann = 0;  // ACL_PKG_NAME_CANN
#define ESG_ACL_INFO_FUNCTIONS(X) X(aclsysGetCANNVersion, Error, (int name, CannPackageVersion * version))

// A kernel binary from memory (a compiled-model file's): optional, so that a CANN without it
// still runs models compiled where they run.
#define ESG_ACL_LOAD_FUNCTIONS(X) \
  X(aclrtBinaryLoadFromData, Error, (const void* data, size_t length, const BinaryLoadOptions* options, BinHandle* handle))

// The table, as pointers.
struct Functions {
#define ESG_ACL_POINTER(name, ret, params) ret(*name) params = nullptr;
  ESG_ACL_FUNCTIONS(ESG_ACL_POINTER)
  ESG_ACL_CAPTURE_FUNCTIONS(ESG_ACL_POINTER)
  ESG_ACL_INFO_FUNCTIONS(ESG_ACL_POINTER)
  ESG_ACL_LOAD_FUNCTIONS(ESG_ACL_POINTER)
  ESG_ACL_KERNEL_FUNCTIONS(ESG_ACL_POINTER)
#undef ESG_ACL_POINTER
};

}  // namespace esg::ascend::acl
