// The Ascend backends, made by the library's start-up (c_api/startup.cpp) for the table of backends
// (backends/registry): the one header of this folder that the library outside the core sees.
#pragma once
#include <memory>

#include "runtime/host_execution.hpp"

namespace esg::ascend {

// The device ("ascend") or the simulated one ("ascend-sim"). `host` runs what the device
// cannot (host_fallback); it outlives the backend.
std::unique_ptr<runtime::Backend> make_backend(bool simulated, const runtime::HostBackend& host);

}  // namespace esg::ascend
