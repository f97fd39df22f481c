// The part of CANN's collective communication library (HCCL) the Ascend backend calls for the
// collectives (op_defs/collective.yaml), declared from CANN's hccl/hccl.h, hccl/hccl_comm.h and
// hccl/hccl_types.h (docs/ascend.md lists each signature) and resolved by name at run time like
// AscendCL: nothing of CANN is needed to build. Since the split of CANN's communication
// libraries, the communicator functions live in libhcomm.so and the collectives in
// libhccl.so; an older CANN has both in libhccl.so.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ascend/acl_api.hpp"

namespace esg::ascend::hccl {

using Result = int32_t;  // HcclResult: 0 is HCCL_SUCCESS
using Comm = void*;      // HcclComm

enum DataType : int32_t {  // HcclDataType (hccl_types.h's values)
  kInt8 = 0, kInt16 = 1, kInt32 = 2, kFp16 = 3, kFp32 = 4, kInt64 = 5, kUint64 = 6, kUint8 = 7,
  kUint16 = 8, kUint32 = 9, kFp64 = 10, kBf16 = 11,
};
enum ReduceOp : int32_t { kSum = 0, kProd = 1, kMax = 2, kMin = 3 };  // HcclReduceOp

constexpr size_t kRootInfoBytes = 4108;  // HCCL_ROOT_INFO_BYTES
struct RootInfo {                        // HcclRootInfo
  char internal[kRootInfoBytes];
};

// The communicator's functions (libhcomm.so, or libhccl.so before the split).
#define ESG_HCCL_COMM_FUNCTIONS(X)                                                        \
  X(HcclGetRootInfo, Result, (RootInfo * root_info))                                         \
  X(HcclCommInitRootInfo, Result, (uint32_t ranks, const RootInfo* root_info, uint32_t rank, Comm* comm)) \
  X(HcclCommDestroy, Result, (Comm comm))                                                    \
  X(HcclGetRankSize, Result, (Comm comm, uint32_t * size))                                   \
  X(HcclGetRankId, Result, (Comm comm, uint32_t * rank))

// The collectives (libhccl.so), each queued on a stream. Counts are elements: AllGather's is
// what each rank sends, ReduceScatter's what each receives, AlltoAll's what goes to each rank.
#define ESG_HCCL_OP_FUNCTIONS(X)                                                                              \
  X(HcclAllReduce, Result, (void* send, void* recv, uint64_t count, DataType type, ReduceOp op, Comm comm, acl::Stream stream)) \
  X(HcclAllGather, Result, (void* send, void* recv, uint64_t send_count, DataType type, Comm comm, acl::Stream stream))          \
  X(HcclReduceScatter, Result,                                                                                   \
    (void* send, void* recv, uint64_t recv_count, DataType type, ReduceOp op, Comm comm, acl::Stream stream))                 \
  X(HcclBroadcast, Result, (void* buffer, uint64_t count, DataType type, uint32_t root, Comm comm, acl::Stream stream))          \
  X(HcclAlltoAll, Result,                                                                                        \
    (const void* send, uint64_t send_count, DataType send_type, const void* recv, uint64_t recv_count, DataType recv_type,     \
     Comm comm, acl::Stream stream))                                                                              \
  X(HcclSend, Result, (void* send, uint64_t count, DataType type, uint32_t dest_rank, Comm comm, acl::Stream stream))            \
  X(HcclRecv, Result, (void* recv, uint64_t count, DataType type, uint32_t src_rank, Comm comm, acl::Stream stream))

struct Functions {
#define ESG_HCCL_DECLARE(fn, ret, params) ret(*fn) params = nullptr;
  ESG_HCCL_COMM_FUNCTIONS(ESG_HCCL_DECLARE)
  ESG_HCCL_OP_FUNCTIONS(ESG_HCCL_DECLARE)
#undef ESG_HCCL_DECLARE
  const char* (*HcclGetErrorString)(Result code) = nullptr;  // optional: its message for an error
};

}  // namespace esg::ascend::hccl
