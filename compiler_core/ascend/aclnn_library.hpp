// CANN's operator library (libnnopbase.so and libopapi.so), loaded from the directory AscendCL
// came from, once per process and only when a model needs it.
#pragma once
#include <memory>
#include <string>

#include "ascend/acl_library.hpp"
#include "ascend/aclnn_api.hpp"

namespace esg::ascend {

class AclnnLibrary : public aclnn::Functions {
 public:
  static std::shared_ptr<AclnnLibrary> open(const AclLibrary& acl);
  // Throws ir::Error(Backend) "`call` failed with aclnn status <code>: <AscendCL's message>".
  void check(aclnn::Status status, const char* call) const;

 private:
  explicit AclnnLibrary(const AclLibrary& acl) : acl_(acl) {}
  const AclLibrary& acl_;  // lives in AclLibrary's process-wide registry
};

#define ESG_ACLNN(lib, fn, ...) (lib).check((lib).fn(__VA_ARGS__), #fn)

}  // namespace esg::ascend
