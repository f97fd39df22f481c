// The Ascend backends, as the table of backends (backends/registry) makes them: the one header
// of this folder that the table sees.
#pragma once
#include <memory>

#include "runtime/host_execution.hpp"

namespace esg::ascend {

// The device ("ascend") or the simulated one ("ascend-sim"). `host` runs what the device
// cannot (host_fallback); it outlives the backend.
std::unique_ptr<runtime::Backend> make_backend(bool simulated, const runtime::HostBackend& host);

}  // namespace esg::ascend
