// Everything esgraph assumes of CANN's C interface, by CANN's own names, for the header check
// (`python3 -m esgraph cann-headers`, python/esgraph/cann_headers.py; docs/ascend.md). The
// functions' signatures are the backend's own tables (acl_api, aclnn_api, hccl_api); this adds
// the constants the backend passes to CANN or compares with what CANN returns, and the structs
// it lays out as CANN does. The backend does not include it: the check and the tests do.
#pragma once
#include "ascend/acl_api.hpp"
#include "ascend/aclnn_api.hpp"
#include "ascend/hccl_api.hpp"

namespace esg::ascend::cann {

// X(CANN's name, esgraph's value), esgraph's fully qualified.
#define ESG_CANN_CONSTANTS(X)                                                                         \
  X(ACL_SUCCESS, esg::ascend::acl::kSuccess)                                                                      \
  X(ACL_MEMCPY_HOST_TO_HOST, esg::ascend::acl::kHostToHost)                                                       \
  X(ACL_MEMCPY_HOST_TO_DEVICE, esg::ascend::acl::kHostToDevice)                                                   \
  X(ACL_MEMCPY_DEVICE_TO_HOST, esg::ascend::acl::kDeviceToHost)                                                   \
  X(ACL_MEMCPY_DEVICE_TO_DEVICE, esg::ascend::acl::kDeviceToDevice)                                               \
  X(ACL_MEM_MALLOC_HUGE_FIRST, esg::ascend::acl::kHugeFirst)                                                      \
  X(ACL_MEM_MALLOC_HUGE_ONLY, esg::ascend::acl::kHugeOnly)                                                        \
  X(ACL_MEM_MALLOC_NORMAL_ONLY, esg::ascend::acl::kNormalOnly)                                                    \
  X(ACL_EVENT_SYNC, esg::ascend::acl::kEventSync)                                                                 \
  X(ACL_MODEL_RI_CAPTURE_MODE_GLOBAL, esg::ascend::acl::kCaptureGlobal)                                           \
  X(ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL, esg::ascend::acl::kCaptureThreadLocal)                                \
  X(ACL_MODEL_RI_CAPTURE_MODE_RELAXED, esg::ascend::acl::kCaptureRelaxed)                                         \
  X(ACL_DEVICE_INFO_AI_CORE_NUM, esg::ascend::acl::kAiCoreNum)                                                    \
  X(ACL_DEVICE_INFO_VECTOR_CORE_NUM, esg::ascend::acl::kVectorCoreNum)                                            \
  X(ACL_DEVICE_INFO_L2_SIZE, esg::ascend::acl::kL2Size)                                                           \
  X(ACL_RT_BINARY_LOAD_OPT_MAGIC, esg::ascend::acl::kBinaryLoadOptionMagic)                                       \
  X(ACL_RT_BINARY_MAGIC_ELF_VECTOR_CORE, esg::ascend::acl::kBinaryMagicVectorCore)                                \
  X(ACL_PKG_NAME_CANN, esg::ascend::acl::kPackageCann)                                                            \
  X(ACL_FLOAT, esg::ascend::aclnn::kFloat)                                                                        \
  X(ACL_FLOAT16, esg::ascend::aclnn::kFloat16)                                                                    \
  X(ACL_INT8, esg::ascend::aclnn::kInt8)                                                                          \
  X(ACL_INT32, esg::ascend::aclnn::kInt32)                                                                        \
  X(ACL_UINT8, esg::ascend::aclnn::kUint8)                                                                        \
  X(ACL_INT16, esg::ascend::aclnn::kInt16)                                                                        \
  X(ACL_UINT16, esg::ascend::aclnn::kUint16)                                                                      \
  X(ACL_UINT32, esg::ascend::aclnn::kUint32)                                                                      \
  X(ACL_INT64, esg::ascend::aclnn::kInt64)                                                                        \
  X(ACL_UINT64, esg::ascend::aclnn::kUint64)                                                                      \
  X(ACL_DOUBLE, esg::ascend::aclnn::kDouble)                                                                      \
  X(ACL_BOOL, esg::ascend::aclnn::kBool)                                                                          \
  X(ACL_BF16, esg::ascend::aclnn::kBf16)                                                                          \
  X(ACL_INT4, esg::ascend::aclnn::kInt4)                                                                          \
  X(ACL_FORMAT_NCHW, esg::ascend::aclnn::kFormatNchw)                                                             \
  X(ACL_FORMAT_ND, esg::ascend::aclnn::kFormatNd)                                                                 \
  X(ACL_FORMAT_NCDHW, esg::ascend::aclnn::kFormatNcdhw)                                                           \
  X(ACL_FORMAT_NCL, esg::ascend::aclnn::kFormatNcl)                                                               \
  X(HCCL_SUCCESS, 0)                                                                                 \
  X(HCCL_DATA_TYPE_INT8, esg::ascend::hccl::kInt8)                                                                \
  X(HCCL_DATA_TYPE_INT16, esg::ascend::hccl::kInt16)                                                              \
  X(HCCL_DATA_TYPE_INT32, esg::ascend::hccl::kInt32)                                                              \
  X(HCCL_DATA_TYPE_FP16, esg::ascend::hccl::kFp16)                                                                \
  X(HCCL_DATA_TYPE_FP32, esg::ascend::hccl::kFp32)                                                                \
  X(HCCL_DATA_TYPE_INT64, esg::ascend::hccl::kInt64)                                                              \
  X(HCCL_DATA_TYPE_UINT64, esg::ascend::hccl::kUint64)                                                            \
  X(HCCL_DATA_TYPE_UINT8, esg::ascend::hccl::kUint8)                                                              \
  X(HCCL_DATA_TYPE_UINT16, esg::ascend::hccl::kUint16)                                                            \
  X(HCCL_DATA_TYPE_UINT32, esg::ascend::hccl::kUint32)                                                            \
  X(HCCL_DATA_TYPE_FP64, esg::ascend::hccl::kFp64)                                                                \
  X(HCCL_DATA_TYPE_BFP16, esg::ascend::hccl::kBf16)                                                               \
  X(HCCL_REDUCE_SUM, esg::ascend::hccl::kSum)                                                                     \
  X(HCCL_REDUCE_PROD, esg::ascend::hccl::kProd)                                                                   \
  X(HCCL_REDUCE_MAX, esg::ascend::hccl::kMax)                                                                     \
  X(HCCL_REDUCE_MIN, esg::ascend::hccl::kMin)                                                                     \
  X(HCCL_ROOT_INFO_BYTES, esg::ascend::hccl::kRootInfoBytes)

// X(CANN's name, esgraph's type): compared field by field, by offset, kind and width.
#define ESG_CANN_STRUCTS(X)                                                                           \
  X(aclrtBinaryLoadOption, esg::ascend::acl::BinaryLoadOption)                                                    \
  X(aclrtBinaryLoadOptions, esg::ascend::acl::BinaryLoadOptions)                                                  \
  X(aclCANNPackageVersion, esg::ascend::acl::CannPackageVersion)                                                  \
  X(HcclRootInfo, esg::ascend::hccl::RootInfo)

// Every function the backend resolves, declared with the backend's own types under CANN's
// names: what the check parses as esgraph's side. Never defined or called.
namespace acl_side {
using namespace esg::ascend::acl;
#define ESG_CANN_DECLARE(name, ret, params) ret name params;
ESG_ACL_FUNCTIONS(ESG_CANN_DECLARE)
ESG_ACL_KERNEL_FUNCTIONS(ESG_CANN_DECLARE)
ESG_ACL_CAPTURE_FUNCTIONS(ESG_CANN_DECLARE)
ESG_ACL_INFO_FUNCTIONS(ESG_CANN_DECLARE)
ESG_ACL_LOAD_FUNCTIONS(ESG_CANN_DECLARE)
}  // namespace acl_side
namespace aclnn_side {
using namespace esg::ascend::aclnn;
namespace acl = esg::ascend::acl;
ESG_ACLNN_BASE_FUNCTIONS(ESG_CANN_DECLARE)
ESG_ACLNN_EXECUTOR_FUNCTIONS(ESG_CANN_DECLARE)
ESG_ACLNN_PLAN_FUNCTIONS(ESG_CANN_DECLARE)
#define ESG_CANN_DECLARE_RUN(name) Status name(void* workspace, uint64_t workspace_size, Executor* executor, acl::Stream stream);
ESG_ACLNN_RUN_FUNCTIONS(ESG_CANN_DECLARE_RUN)
#undef ESG_CANN_DECLARE_RUN
}  // namespace aclnn_side
namespace hccl_side {
using namespace esg::ascend::hccl;
namespace acl = esg::ascend::acl;
ESG_HCCL_COMM_FUNCTIONS(ESG_CANN_DECLARE)
ESG_HCCL_OP_FUNCTIONS(ESG_CANN_DECLARE)
const char* HcclGetErrorString(Result code);
#undef ESG_CANN_DECLARE
}  // namespace hccl_side

}  // namespace esg::ascend::cann
