/* A stand-in for CANN's hccl/hccl.h, written for the header check's tests: its types' header is
   missing, so the declaration below cannot be read. */
#ifndef ESG_FIXTURE_HCCL_H
#define ESG_FIXTURE_HCCL_H
#include <hccl/hccl_types.h>

HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize);

#endif
