#include "ascend/aclnn_library.hpp"

#include <dlfcn.h>

#include <map>
#include <mutex>

#include "ir/error.hpp"

namespace esg::ascend {

std::shared_ptr<AclnnLibrary> AclnnLibrary::open(const AclLibrary& acl) {
  static std::mutex mu;
  static auto* opened = new std::map<const AclLibrary*, std::shared_ptr<AclnnLibrary>>();  // outlives static destructors
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = opened->find(&acl); it != opened->end()) return it->second;
  const std::string& path = acl.path();
  const std::string dir = path.find('/') == std::string::npos ? "" : path.substr(0, path.rfind('/') + 1);
  std::shared_ptr<AclnnLibrary> lib(new AclnnLibrary(acl));
  std::string missing;  // of the descriptors' functions, which every call needs
  for (const char* name : {"libnnopbase.so", "libopapi.so"}) {
    std::string found, tried;
    void* handle = dlopen_first({dir + name}, &found, &tried);
    if (!handle)
      throw ir::Error(ir::ErrorCode::Backend, std::string("ascend: cannot load CANN's operator library (") + name + ") next to " + path +
                                                  ":" + tried);
    auto resolve = [&](const char* symbol) {
      void* sym = dlsym(handle, symbol);
      return sym;
    };
    if (std::string(name) == "libnnopbase.so") {
#define ESG_ACLNN_RESOLVE(fn, ret, params) \
  if (!(lib->fn = reinterpret_cast<decltype(lib->fn)>(resolve(#fn)))) missing += std::string(missing.empty() ? "" : ", ") + #fn;
      ESG_ACLNN_BASE_FUNCTIONS(ESG_ACLNN_RESOLVE)
    } else {  // the ops: each one only when a model uses it (AclnnCall checks has())
#undef ESG_ACLNN_RESOLVE
#define ESG_ACLNN_RESOLVE(fn, ret, params) \
  if (!(lib->fn = reinterpret_cast<decltype(lib->fn)>(resolve(#fn)))) lib->lacking_.insert(#fn);
      ESG_ACLNN_PLAN_FUNCTIONS(ESG_ACLNN_RESOLVE)
#undef ESG_ACLNN_RESOLVE
#define ESG_ACLNN_RESOLVE_RUN(fn) \
  if (!(lib->fn = reinterpret_cast<aclnn::RunFn>(resolve(#fn)))) lib->lacking_.insert(#fn);
      ESG_ACLNN_RUN_FUNCTIONS(ESG_ACLNN_RESOLVE_RUN)
#undef ESG_ACLNN_RESOLVE_RUN
    }
  }
  if (!missing.empty()) throw ir::Error(ir::ErrorCode::Backend, "ascend: CANN's operator library in " + dir + " lacks " + missing);
  lib->dir_ = dir;
  (*opened)[&acl] = lib;
  return lib;
}

void AclnnLibrary::require(const char* name, const std::string& op) const {
  std::string lacks;
  const std::string halves[] = {std::string(name) + "GetWorkspaceSize", name};
  for (const std::string& fn : halves)
    if (lacking_.count(fn)) lacks += (lacks.empty() ? "" : " and ") + fn;
  if (!lacks.empty())
    throw ir::Error(ir::ErrorCode::Unsupported, "ascend: " + op + " runs as " + name + ", and CANN's operator library in " + dir_ +
                                                    " lacks " + lacks + " (an older CANN?)");
}

void AclnnLibrary::check(aclnn::Status status, const char* call) const {
  if (status == 0) return;
  const char* message = acl_.aclGetRecentErrMsg();
  throw ir::Error(ir::ErrorCode::Backend, std::string("ascend: ") + call + " failed with aclnn status " + std::to_string(status) +
                                              (message && *message ? std::string(": ") + message : std::string()));
}

}  // namespace esg::ascend
