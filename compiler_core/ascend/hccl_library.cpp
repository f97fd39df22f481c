#include "ascend/hccl_library.hpp"

#include <dlfcn.h>

#include <map>
#include <mutex>

#include "dist/world.hpp"
#include "ir/error.hpp"

namespace esg::ascend {

std::shared_ptr<HcclLibrary> HcclLibrary::open(const AclLibrary& acl) {
  static std::mutex mu;
  static auto* opened = new std::map<const AclLibrary*, std::shared_ptr<HcclLibrary>>();  // outlives static destructors
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = opened->find(&acl); it != opened->end()) return it->second;
  const std::string& path = acl.path();
  const std::string dir = acl.dir();
  std::shared_ptr<HcclLibrary> lib(new HcclLibrary());
  std::string found, tried;
  void* ops = dlopen_first({dir + "libhccl.so"}, &found, &tried);
  if (!ops)
    throw ir::Error(ir::ErrorCode::Backend, "ascend: cannot load CANN's collective communication library (libhccl.so) next to " + path + ":" + tried);
  lib->libraries_ = "libhccl.so";
  // The communicator's functions from libhcomm.so where CANN has split it off, else libhccl.so.
  std::string hcomm_found, hcomm_tried;
  void* comm = dlopen_first({dir + "libhcomm.so"}, &hcomm_found, &hcomm_tried);
  if (comm) lib->libraries_ += ", libhcomm.so";
  auto resolve = [&](const char* symbol) -> void* {
    void* sym = comm ? dlsym(comm, symbol) : nullptr;
    return sym ? sym : dlsym(ops, symbol);
  };
  std::string missing;
#define ESG_HCCL_RESOLVE(fn, ret, params) \
  if (!(lib->fn = reinterpret_cast<decltype(lib->fn)>(resolve(#fn)))) missing += std::string(missing.empty() ? "" : ", ") + #fn;
  ESG_HCCL_COMM_FUNCTIONS(ESG_HCCL_RESOLVE)
  ESG_HCCL_OP_FUNCTIONS(ESG_HCCL_RESOLVE)
#undef ESG_HCCL_RESOLVE
  lib->HcclGetErrorString = reinterpret_cast<decltype(lib->HcclGetErrorString)>(resolve("HcclGetErrorString"));
  if (!missing.empty())
    throw ir::Error(ir::ErrorCode::Backend, "ascend: CANN's collective communication library in " + dir + " (" + lib->libraries_ + ") lacks " + missing);
  (*opened)[&acl] = lib;
  return lib;
}

void HcclLibrary::check(hccl::Result result, const char* call) const {
  if (result == 0) return;
  const char* message = HcclGetErrorString ? HcclGetErrorString(result) : nullptr;
  throw ir::Error(ir::ErrorCode::Backend, std::string("ascend: ") + call + " failed with HCCL error " + std::to_string(result) +
                                              (message && *message ? std::string(": ") + message : std::string()));
}

hccl::Comm HcclLibrary::communicator(const eval::Collective& collective, int device) {
  dist::Communicator* made_group = nullptr;
  try {
    made_group = &collective.communicator();
  } catch (const dist::Error& e) {
    throw ir::Error(ir::ErrorCode::Communication, e.what());
  }
  dist::Communicator& group = *made_group;
  static std::mutex mu;
  static auto* made = new std::map<std::pair<const dist::Communicator*, int>, hccl::Comm>();  // for the process's life
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = made->find({&group, device}); it != made->end()) return it->second;
  // The group's first rank makes the root info; the distributed layer hands it to the others.
  hccl::RootInfo info{};
  if (group.rank() == 0) ESG_HCCL(*this, HcclGetRootInfo, &info);
  const std::string label = "the HCCL root info of the group " + dist::ranks_str(group.world_ranks());
  try {
    group.broadcast(&info, sizeof info, 0, {label, dist::collective_timeout_ms()});
  } catch (const dist::Error& e) {
    throw ir::Error(ir::ErrorCode::Communication, e.what());
  }
  hccl::Comm comm = nullptr;
  ESG_HCCL(*this, HcclCommInitRootInfo, static_cast<uint32_t>(group.size()), &info, static_cast<uint32_t>(group.rank()), &comm);
  (*made)[{&group, device}] = comm;
  return comm;
}

}  // namespace esg::ascend
