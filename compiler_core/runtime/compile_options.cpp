#include "runtime/compile_options.hpp"

#include <algorithm>
#include <thread>

#include "ir/error.hpp"

namespace esg::runtime {
namespace {

using ir::Error;
using ir::ErrorCode;

// Every option the caller set is one the backend declares, within its range.
void check_backend_options(const Backend& backend, const BackendOptions& given) {
  const std::vector<BackendOption> declared = backend.options();
  for (const auto& given_option : given.values()) {
    const std::string& name = given_option.first;
    const int64_t value = given_option.second;
    const auto it = std::find_if(declared.begin(), declared.end(), [&](const BackendOption& o) { return name == o.name; });
    if (it == declared.end()) {
      std::string known;
      for (const BackendOption& o : declared) known += (known.empty() ? "" : ", ") + std::string(o.name);
      throw Error(ErrorCode::InvalidArgument, "compile: backend '" + std::string(backend.name()) + "' has no option `" + name + "`" +
                                                  (known.empty() ? " (it takes none)" : " (it takes " + known + ")"));
    }
    if (value < it->min || value > it->max)
      throw Error(ErrorCode::InvalidArgument, "compile: " + std::string(backend.name()) + " option " + name + " " + std::to_string(value) +
                                                  " (" + std::to_string(it->min) + " .. " + std::to_string(it->max) + ")");
  }
}

}  // namespace

int CompileOptions::pool_threads() const {
  // Asked once: glibc reads /sys for it each time (three system calls per ask, which a symbolic
  // plan's bindings would pay per launch).
  static const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return threads > 0 ? threads : cores;
}

void check_compile_options(const CompileOptions& options, const ir::Graph& graph) {
  if (options.cache_max_bytes < 0) throw Error(ErrorCode::InvalidArgument, "compile: cache_max_bytes " + std::to_string(options.cache_max_bytes) + " (0: no bound)");
  if (options.streams < 1 || options.streams > 16)
    throw Error(ErrorCode::InvalidArgument, "compile: streams must be 1..16, got " + std::to_string(options.streams));
  if (options.threads < 0 || options.threads > 256)
    throw Error(ErrorCode::InvalidArgument, "compile: threads must be 0..256, got " + std::to_string(options.threads));
  if (!options.backend) throw Error(ErrorCode::InvalidArgument, "compile: no backend");
  if (options.max_loop_iterations < 0 || options.max_nodes < 0 || options.max_plans < 0 || options.max_memory_bytes < 0)
    throw Error(ErrorCode::InvalidArgument,
                "compile: max_loop_iterations, max_nodes, max_plans and max_memory_bytes must be 0 (no limit) or more");
  if (options.max_nodes && static_cast<int64_t>(graph.nodes.size()) > options.max_nodes)
    throw Error(ErrorCode::Limit, "compile: the graph has " + std::to_string(graph.nodes.size()) + " nodes, more than max_nodes (" +
                                      std::to_string(options.max_nodes) + "); raise max_nodes to compile it");
  check_backend_options(*options.backend, options.backend_options);
  options.backend->check(options);
}

}  // namespace esg::runtime
