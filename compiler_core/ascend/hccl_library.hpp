// HCCL, loaded at run time next to the AscendCL in use (hccl_api.hpp), and the communicators
// of the groups a model's collectives run in: made once per group and device, each from a root
// info that the group's first rank makes and the distributed layer's communicator (MPI)
// broadcasts, as CANN's HcclGetRootInfo / HcclCommInitRootInfo pairing asks.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ascend/acl_library.hpp"
#include "ascend/hccl_api.hpp"
#include "eval/collective.hpp"

namespace esg::ascend {

class HcclLibrary : public hccl::Functions {
 public:
  static std::shared_ptr<HcclLibrary> open(const AclLibrary& acl);
  // Throws ir::Error(Backend) "`call` failed with HCCL error <code>: <message>" unless ok.
  void check(hccl::Result result, const char* call) const;
  // The HCCL communicator of `group` (every member calls this together), on device `device`;
  // kept for the process's life. A failure of the group's transport is ir::Error(Communication).
  hccl::Comm communicator(const eval::Collective& group, int device);
  const std::string& libraries() const { return libraries_; }

 private:
  HcclLibrary() = default;
  std::string libraries_;  // the files found, for messages
};

#define ESG_HCCL(lib, fn, ...) (lib).check((lib).fn(__VA_ARGS__), #fn)

}  // namespace esg::ascend
