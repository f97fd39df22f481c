#include "dist/world.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "dist/local_communicator.hpp"
#include "ir/error.hpp"
#include "ir/world.hpp"

namespace esg::dist {
namespace {

using ir::ErrorCode;

// The plugin's one entry point (dist/mpi/mpi_transport.cpp): a transport over `comm` (an
// MPI_Comm*, or null for MPI_COMM_WORLD), or null with `error` filled.
using OpenTransport = Transport* (*)(const void* comm, char* error, size_t error_size);
constexpr const char* kPluginEntry = "esg_mpi_transport_open";
constexpr const char* kPluginName = "libesgraph_mpi.so";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Whether an MPI launcher started this process (Open MPI's mpirun, MPICH's Hydra, Slurm).
std::string launcher_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (!env(name).empty()) return std::string(name) + "=" + env(name);
  return "";
}

// Where the plugin lies: ESG_MPI_PLUGIN, else beside the library holding this code (an
// install), else where this build made it.
std::vector<std::string> plugin_paths() {
  if (!env("ESG_MPI_PLUGIN").empty()) return {env("ESG_MPI_PLUGIN")};
  std::vector<std::string> paths;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&plugin_paths), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    const size_t slash = self.rfind('/');
    if (slash != std::string::npos) paths.push_back(self.substr(0, slash + 1) + kPluginName);
  }
#ifdef ESG_MPI_PLUGIN_PATH
  paths.push_back(ESG_MPI_PLUGIN_PATH);
#endif
  return paths;
}

Transport* open_mpi(const void* comm) {
  std::string tried;
  for (const std::string& path : plugin_paths()) {
    // RTLD_GLOBAL: Open MPI opens its own components later and they look for libmpi's symbols.
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
      tried += "\n  " + path + ": " + dlerror();
      continue;
    }
    auto open = reinterpret_cast<OpenTransport>(dlsym(lib, kPluginEntry));
    if (!open) throw ir::Error(ErrorCode::Backend, path + " has no " + kPluginEntry + ": not esgraph's MPI plugin");
    char error[512] = {};
    Transport* t = open(comm, error, sizeof error);
    if (!t) throw ir::Error(ErrorCode::Backend, std::string("MPI did not start: ") + error);
    return t;  // the library stays loaded for the process's life
  }
  throw ir::Error(ErrorCode::Backend, "esgraph's MPI plugin (" + std::string(kPluginName) +
                                      ", built when Open MPI is installed) was not found; tried:" + tried);
}

const void* handed_communicator = nullptr;
bool world_found = false;
std::mutex handed_mu;

}  // namespace

struct World::State {
  std::unique_ptr<Transport> transport;  // null: a world of one
  std::mutex turn;
  std::mutex mu;  // groups
  std::map<std::vector<int>, std::shared_ptr<Communicator>> groups;
};

namespace {
std::shared_ptr<World::State> live_state;  // for the exit handler
void shut_down_at_exit() {
  if (live_state && live_state->transport) live_state->transport->shutdown();
}
}  // namespace

World::World() : state_(std::make_shared<State>()) {
  const void* comm = nullptr;
  {
    std::lock_guard<std::mutex> lock(handed_mu);
    comm = handed_communicator;
    world_found = true;
  }
  if (comm || !launcher_size().empty()) {
    state_->transport.reset(open_mpi(comm));
    live_state = state_;
    std::atexit(shut_down_at_exit);
  }
}

int World::size() const { return state_->transport ? state_->transport->size() : 1; }
int World::rank() const { return state_->transport ? state_->transport->rank() : 0; }
const char* World::transport() const { return state_->transport ? state_->transport->name() : "local"; }

std::shared_ptr<Communicator> World::group(const std::vector<int>& ranks) {
  std::vector<int> members = ranks;
  if (members.empty())
    for (int r = 0; r < size(); ++r) members.push_back(r);
  std::lock_guard<std::mutex> lock(state_->mu);
  std::shared_ptr<Communicator>& c = state_->groups[members];
  if (!c) {
    if (state_->transport) c = state_->transport->group(members, collective_timeout_ms());
    else c = make_local_communicator(0);
  }
  return c;
}

std::mutex& World::turn() { return state_->turn; }

World& world() {
  static World w;
  return w;
}

void use_mpi_communicator(const void* comm) {
  if (!comm) throw ir::Error(ErrorCode::InvalidArgument, "esg_dist_use_mpi_comm: the communicator is null (pass an MPI_Comm*)");
  {
    std::lock_guard<std::mutex> lock(handed_mu);
    if (world_found)
      throw ir::Error(ErrorCode::InvalidArgument,
                      "esg_dist_use_mpi_comm: the world is already found (a collective was built or run): hand the communicator over first");
    handed_communicator = comm;
  }
  world();  // duplicates it now: the caller's MPI_Comm need not outlive this call
}

int64_t collective_timeout_ms() {
  static const int64_t ms = [] {
    const std::string v = env("ESG_COLLECTIVE_TIMEOUT_MS");
    char* end = nullptr;
    const long long parsed = v.empty() ? 0 : std::strtoll(v.c_str(), &end, 10);
    return parsed > 0 && end && *end == '\0' ? static_cast<int64_t>(parsed) : int64_t{60000};
  }();
  return ms;
}

void install_world_probe() {
  ir::set_world_probe([]() -> ir::World {
    World& w = world();
    return {w.size(), w.rank()};
  });
}

}  // namespace esg::dist
