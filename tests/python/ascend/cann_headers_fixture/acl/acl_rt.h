/* A stand-in for CANN's acl/acl_rt.h, written for the header check's tests
   (tests/python/ascend/test_cann_headers.py): a few of the declarations esgraph uses, as CANN
   spells them, four of them made to differ from esgraph's on purpose. */
#ifndef ESG_FIXTURE_ACL_RT_H
#define ESG_FIXTURE_ACL_RT_H
#include <stddef.h>
#include <stdint.h>

typedef int aclError;
static const int ACL_SUCCESS = 0;
typedef void *aclrtStream;
typedef void *aclrtBinHandle;

typedef enum aclrtMemcpyKind {
  ACL_MEMCPY_HOST_TO_HOST,
  ACL_MEMCPY_HOST_TO_DEVICE,
  ACL_MEMCPY_DEVICE_TO_HOST,
  ACL_MEMCPY_DEVICE_TO_DEVICE,
} aclrtMemcpyKind;

#define ACL_EVENT_SYNC 0x00000001U
/* Differs: one more than the vector core's magic. */
#define ACL_RT_BINARY_MAGIC_ELF_VECTOR_CORE 0x41415247U

typedef enum { ACL_RT_BINARY_LOAD_OPT_LAZY_LOAD = 1, ACL_RT_BINARY_LOAD_OPT_MAGIC = 2 } aclrtBinaryLoadOptionType;
typedef union {
  uint32_t isLazyLoad;
  uint32_t magic;
  int32_t cpuKernelMode;
  uint32_t rsv[4];
} aclrtBinaryLoadOptionValue;
typedef struct {
  aclrtBinaryLoadOptionType type;
  aclrtBinaryLoadOptionValue value;
} aclrtBinaryLoadOption;
/* Differs: the count is 32 bits wide (esgraph lays out a size_t). */
typedef struct {
  aclrtBinaryLoadOption *options;
  uint32_t numOpt;
} aclrtBinaryLoadOptions;

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind);
aclError aclrtSetDevice(int32_t deviceId);
/* The same to the machine: esgraph passes the options as void*. */
aclError aclrtBinaryLoadFromFile(const char *binPath, aclrtBinaryLoadOptions *options, aclrtBinHandle *binHandle);
/* Differs: the count's width. */
aclError aclrtGetDeviceCount(uint64_t *count);
/* Differs: one parameter more. */
aclError aclrtCreateStream(aclrtStream *stream, uint32_t priority);
aclError aclrtSynchronizeStream(aclrtStream stream);
#ifdef __cplusplus
/* A C++ convenience overload, which the library does not export: not what esgraph loads. */
static inline aclError aclrtSynchronizeStream(aclrtStream stream, int32_t timeout) {
  (void)stream;
  return timeout;
}
#endif

#endif
