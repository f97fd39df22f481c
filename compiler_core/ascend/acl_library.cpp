#include "ascend/acl_library.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "ir/error.hpp"

namespace esg::ascend {
namespace {

using ir::Error;
using ir::ErrorCode;

constexpr const char* kLibraryName = "libascendcl.so";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::mutex& registry_mutex() {
  static std::mutex mu;
  return mu;
}
// Every library opened, by path: AscendCL is initialized once per process and stays loaded.
std::map<std::string, std::shared_ptr<AclLibrary>>& registry() {
  static auto* libraries = new std::map<std::string, std::shared_ptr<AclLibrary>>();  // outlives static destructors
  return *libraries;
}

}  // namespace

std::vector<std::string> AclLibrary::search_paths() {
  std::vector<std::string> dirs;
  for (const char* var : {"ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"})
    if (!env(var).empty()) dirs.push_back(env(var) + "/lib64/" + kLibraryName);
  for (const char* root : {"/usr/local/Ascend/ascend-toolkit/latest", "/usr/local/Ascend/latest", "/usr/local/Ascend/cann"})
    dirs.push_back(std::string(root) + "/lib64/" + kLibraryName);
  dirs.push_back(kLibraryName);  // the dynamic linker's own search: LD_LIBRARY_PATH, ld.so.cache
  return dirs;
}

std::string AclLibrary::simulator_path() {
  return env("ESG_ASCEND_SIM_LIBRARY").empty() ? ESG_ASCEND_SIM_LIBRARY : env("ESG_ASCEND_SIM_LIBRARY");
}

std::shared_ptr<AclLibrary> AclLibrary::open(const std::string& path) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  const std::vector<std::string> candidates = path.empty() ? search_paths() : std::vector<std::string>{path};
  for (const std::string& c : candidates)
    if (auto it = registry().find(c); it != registry().end()) return it->second;
  std::string found, tried;
  void* handle = dlopen_first(candidates, &found, &tried);
  if (!handle)
    throw Error(ErrorCode::Backend, "ascend: cannot load AscendCL (" + std::string(kLibraryName) +
                                        "); install CANN and set ASCEND_HOME_PATH (source set_env.sh), or use "
                                        "backend=\"ascend-sim\". Looked at:" + tried);
  std::shared_ptr<AclLibrary> lib(new AclLibrary());
  lib->handle_ = handle;
  lib->path_ = found;
  std::string missing;
  auto resolve = [&](const char* name, bool required) {
    dlerror();
    void* sym = dlsym(handle, name);
    if (!sym && required) missing += std::string(missing.empty() ? "" : ", ") + name;
    return sym;
  };
#define ESG_ACL_RESOLVE(name, ret, params) lib->name = reinterpret_cast<decltype(lib->name)>(resolve(#name, true));
  ESG_ACL_FUNCTIONS(ESG_ACL_RESOLVE)
#undef ESG_ACL_RESOLVE
#define ESG_ACL_RESOLVE_OPTIONAL(name, ret, params) lib->name = reinterpret_cast<decltype(lib->name)>(resolve(#name, false));
  ESG_ACL_CAPTURE_FUNCTIONS(ESG_ACL_RESOLVE_OPTIONAL)
  ESG_ACL_INFO_FUNCTIONS(ESG_ACL_RESOLVE_OPTIONAL)
  ESG_ACL_LOAD_FUNCTIONS(ESG_ACL_RESOLVE_OPTIONAL)
  ESG_ACL_KERNEL_FUNCTIONS(ESG_ACL_RESOLVE_OPTIONAL)
#undef ESG_ACL_RESOLVE_OPTIONAL
  // Capture and the kernel API are each all or nothing.
  bool capture = true;
#define ESG_ACL_PRESENT(name, ret, params) capture = capture && lib->name;
  ESG_ACL_CAPTURE_FUNCTIONS(ESG_ACL_PRESENT)
#undef ESG_ACL_PRESENT
#define ESG_ACL_LACKS(name, ret, params) \
  if (!lib->name) lib->kernel_api_missing_ += std::string(lib->kernel_api_missing_.empty() ? "" : ", ") + #name;
  ESG_ACL_KERNEL_FUNCTIONS(ESG_ACL_LACKS)
#undef ESG_ACL_LACKS
#define ESG_ACL_DROP(name, ret, params) lib->name = nullptr;
  if (!capture) { ESG_ACL_CAPTURE_FUNCTIONS(ESG_ACL_DROP) }
  if (!lib->kernel_api_missing_.empty()) { ESG_ACL_KERNEL_FUNCTIONS(ESG_ACL_DROP) }
#undef ESG_ACL_DROP
  if (!missing.empty()) {
    dlclose(handle);
    lib->handle_ = nullptr;
    throw Error(ErrorCode::Backend, "ascend: " + found + " lacks " + missing + " (not an AscendCL esgraph can use: docs/ascend.md)");
  }
  // Another part of the process (torch_npu, the application) may have initialized AscendCL.
  constexpr acl::Error kRepeatInitialize = 100002;  // ACL_ERROR_REPEAT_INITIALIZE
  if (const acl::Error e = lib->aclInit(nullptr); e != kRepeatInitialize) lib->check(e, "aclInit");
  registry()[found] = lib;
  if (!path.empty() && path != found) registry()[path] = lib;
  return lib;
}

std::string AclLibrary::cann_version() const {
  acl::CannPackageVersion v{};
  if (!aclsysGetCANNVersion || aclsysGetCANNVersion(acl::kPackageCann, &v) != acl::kSuccess) return "unknown";
  v.version[sizeof v.version - 1] = 0;
  return v.version[0] ? v.version : "unknown";
}

void* dlopen_first(const std::vector<std::string>& candidates, std::string* found, std::string* tried) {
  for (const std::string& c : candidates) {
    dlerror();
    if (void* handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *found = c;
      return handle;
    }
    const char* why = dlerror();
    *tried += "\n  " + c + ": " + (why ? why : "not found");
  }
  return nullptr;
}

void AclLibrary::check(acl::Error status, const char* call) const {
  if (status == acl::kSuccess) return;
  throw Error(ErrorCode::Backend, std::string("ascend: ") + call + " failed with AscendCL error " + std::to_string(status) + ": " + recent_error());
}

std::string AclLibrary::recent_error() const {
  const char* message = aclGetRecentErrMsg ? aclGetRecentErrMsg() : nullptr;
  return message && *message ? message : "AscendCL gave no message";
}

AclLibrary::~AclLibrary() {
  // Only reached for a library that failed to resolve (loaded ones live in the registry).
  if (handle_) dlclose(handle_);
}

}  // namespace esg::ascend
