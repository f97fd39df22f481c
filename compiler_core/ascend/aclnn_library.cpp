#include "ascend/aclnn_library.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <vector>

#include "ir/error.hpp"

namespace esg::ascend {

std::shared_ptr<AclnnLibrary> AclnnLibrary::open(const AclLibrary& acl) {
  static std::mutex mu;
  static auto* opened = new std::map<const AclLibrary*, std::shared_ptr<AclnnLibrary>>();  // outlives static destructors
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = opened->find(&acl); it != opened->end()) return it->second;
  const std::string& path = acl.path();
  const std::string dir = acl.dir();
  std::shared_ptr<AclnnLibrary> lib(new AclnnLibrary(acl));
  std::string missing;  // of the descriptors' functions, which every call needs
  {
    std::string found, tried;
    void* base = dlopen_first({dir + "libnnopbase.so"}, &found, &tried);
    if (!base)
      throw ir::Error(ir::ErrorCode::Backend, "ascend: cannot load CANN's operator library (libnnopbase.so) next to " + path + ":" + tried);
#define ESG_ACLNN_RESOLVE(fn, ret, params) \
  if (!(lib->fn = reinterpret_cast<decltype(lib->fn)>(dlsym(base, #fn)))) missing += std::string(missing.empty() ? "" : ", ") + #fn;
    ESG_ACLNN_BASE_FUNCTIONS(ESG_ACLNN_RESOLVE)
#undef ESG_ACLNN_RESOLVE
#define ESG_ACLNN_RESOLVE(fn, ret, params) lib->fn = reinterpret_cast<decltype(lib->fn)>(dlsym(base, #fn));
    ESG_ACLNN_EXECUTOR_FUNCTIONS(ESG_ACLNN_RESOLVE)
#undef ESG_ACLNN_RESOLVE
  }
  // The ops: libopapi.so, or, from CANN 8.5 on, the libraries of the operator repositories
  // (libopapi_math.so, libopapi_nn.so, ...); each function from the first that has it, and each
  // only needed when a model uses it (AclnnCall checks has()).
  std::vector<void*> ops;
  std::vector<std::string> names = {"libopapi.so"};
  std::error_code ec;  // AscendCL found by the dynamic linker (no directory): libopapi.so by name only
  for (const auto& entry : std::filesystem::directory_iterator(dir.empty() ? std::filesystem::path() : std::filesystem::path(dir), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("libopapi_", 0) == 0 && name.size() > 12 && name.compare(name.size() - 3, 3, ".so") == 0) names.push_back(name);
  }
  std::sort(names.begin() + 1, names.end());
  std::string tried;
  for (const std::string& name : names) {
    std::string found;
    if (void* handle = dlopen_first({dir + name}, &found, &tried)) ops.push_back(handle), lib->libraries_ += (lib->libraries_.empty() ? "" : ", ") + name;
  }
  if (ops.empty())
    throw ir::Error(ir::ErrorCode::Backend, "ascend: cannot load CANN's operator library (libopapi.so, or libopapi_*.so from CANN 8.5) next to " +
                                                path + ":" + tried);
  auto resolve = [&](const char* symbol) -> void* {
    for (void* handle : ops)
      if (void* sym = dlsym(handle, symbol)) return sym;
    return nullptr;
  };
#define ESG_ACLNN_RESOLVE(fn, ret, params) \
  if (!(lib->fn = reinterpret_cast<decltype(lib->fn)>(resolve(#fn)))) lib->lacking_.insert(#fn);
  ESG_ACLNN_PLAN_FUNCTIONS(ESG_ACLNN_RESOLVE)
#undef ESG_ACLNN_RESOLVE
#define ESG_ACLNN_RESOLVE_RUN(fn) \
  if (!(lib->fn = reinterpret_cast<aclnn::RunFn>(resolve(#fn)))) lib->lacking_.insert(#fn);
  ESG_ACLNN_RUN_FUNCTIONS(ESG_ACLNN_RESOLVE_RUN)
#undef ESG_ACLNN_RESOLVE_RUN
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
                                                    " (" + libraries_ + ") lacks " + lacks + " (an older CANN?)");
}

void AclnnLibrary::check(aclnn::Status status, const char* call) const {
  if (status == 0) return;
  throw ir::Error(ir::ErrorCode::Backend, std::string("ascend: ") + call + " failed with aclnn status " + std::to_string(status) + ": " +
                                              acl_.recent_error());
}

}  // namespace esg::ascend
