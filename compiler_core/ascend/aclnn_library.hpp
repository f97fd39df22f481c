// CANN's operator library (libnnopbase.so, and libopapi.so or, from CANN 8.5 on, one library per
// operator repository: libopapi_math.so, libopapi_nn.so, ...), loaded from the directory
// AscendCL came from, once per process and only when a model needs it.
#pragma once
#include <memory>
#include <set>
#include <string>

#include "ascend/acl_library.hpp"
#include "ascend/aclnn_api.hpp"

namespace esg::ascend {

class AclnnLibrary : public aclnn::Functions {
 public:
  static std::shared_ptr<AclnnLibrary> open(const AclLibrary& acl);
  // Throws ir::Error(Backend) "`call` failed with aclnn status <code>: <AscendCL's message>".
  void check(aclnn::Status status, const char* call) const;
  // Throws ir::Error(Unsupported) naming what this installation lacks unless it has both
  // halves of op `name` (aclnnXxxGetWorkspaceSize and aclnnXxx): CANN versions differ in their
  // ops, and a model that uses none of the missing ones runs.
  void require(const char* name, const std::string& op) const;

 private:
  explicit AclnnLibrary(const AclLibrary& acl) : acl_(acl) {}
  const AclLibrary& acl_;  // lives in AclLibrary's process-wide registry
  std::set<std::string> lacking_;  // op functions no operator library exports
  std::string libraries_;          // the operator libraries found, for messages
  std::string dir_;
};

#define ESG_ACLNN(lib, fn, ...) (lib).check((lib).fn(__VA_ARGS__), #fn)

}  // namespace esg::ascend
