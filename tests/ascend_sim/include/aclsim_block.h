/* What the simulated device tells a kernel binary before each block runs: which block, how
 * many, and the device heap's bounds check. Shared by the stand-in AscendCL (acl_sim.cpp) and
 * the host build of the Ascend C subset (kernel_operator.h). */
#ifndef ACLSIM_BLOCK_H
#define ACLSIM_BLOCK_H
#include <stddef.h>
#include <stdint.h>

typedef struct AclSimBlock {
  uint32_t index, count;
  /* Throws (a C++ exception) unless [p, p + bytes) lies in one live device allocation. */
  void (*check_device)(const void* p, size_t bytes, const char* what);
} AclSimBlock;

/* Every simulated kernel binary exports this; the device calls it on the block's thread. */
typedef void (*AclSimEnterBlock)(const AclSimBlock* block);
#define ACLSIM_ENTER_BLOCK "aclsim_enter_block"

#endif
