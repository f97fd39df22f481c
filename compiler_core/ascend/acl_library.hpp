// AscendCL, loaded at run time: the library is found (an explicit path, CANN's install
// locations, then the dynamic linker's search), every function of acl_api.hpp resolved by name,
// and aclInit called once per process. A missing library or symbol is one clear error naming
// what was looked for and where; a failing call becomes an esgraph error carrying AscendCL's
// own message.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ascend/acl_api.hpp"

namespace esg::ascend {

class AclLibrary : public acl::Functions {
 public:
  // The process's AscendCL from `path` (a file) or, when empty, from the search. Libraries stay
  // loaded for the life of the process (AscendCL cannot be initialized twice).
  static std::shared_ptr<AclLibrary> open(const std::string& path);
  // Where the search looks, in order (for errors and docs).
  static std::vector<std::string> search_paths();
  // The simulated device's stand-in (ESG_ASCEND_SIM_LIBRARY, else the build tree's).
  static std::string simulator_path();

  const std::string& path() const { return path_; }
  // Its directory with a trailing '/', where CANN keeps its other libraries (aclnn's, HCCL's);
  // "" when the dynamic linker found it by name.
  std::string dir() const { return path_.find('/') == std::string::npos ? "" : path_.substr(0, path_.rfind('/') + 1); }
  bool has_capture() const { return aclmdlRICaptureBegin != nullptr; }
  // The kernel API's functions this AscendCL lacks ("": it has them all, and generated kernels
  // can run; else none is resolved).
  const std::string& kernel_api_missing() const { return kernel_api_missing_; }
  // The installed CANN's version (aclsysGetCANNVersion), or "unknown".
  std::string cann_version() const;
  // Throws ir::Error(Backend) "`call` failed with AscendCL error <code>: <message>" unless ok.
  void check(acl::Error status, const char* call) const;
  // The calling thread's most recent AscendCL error text (aclGetRecentErrMsg), or words saying
  // there is none: CANN returns NULL when no message is set, and a failure may set none.
  std::string recent_error() const;

  ~AclLibrary();

 private:
  AclLibrary() = default;
  void* handle_ = nullptr;
  std::string path_;
  std::string kernel_api_missing_;
};

// dlopen's the first of `candidates` that loads (RTLD_NOW | RTLD_LOCAL): its handle and path,
// or nullptr with every candidate and dlerror's reason appended to `tried`.
void* dlopen_first(const std::vector<std::string>& candidates, std::string* found, std::string* tried);

// lib.check(lib.fn(args...), "fn"): one call, checked.
#define ESG_ACL(lib, fn, ...) (lib).check((lib).fn(__VA_ARGS__), #fn)

}  // namespace esg::ascend
