// The CPU backend, as the table of backends (backends/registry) makes it: the one header of
// this folder that the table sees.
#pragma once
#include <memory>

#include "runtime/host_execution.hpp"

namespace esg::cpu {

std::unique_ptr<runtime::HostBackend> make_backend();

}  // namespace esg::cpu
