// The CPU backend, made by the library's start-up (c_api/startup.cpp) for the table of backends
// (backends/registry): the one header of this folder that the library outside the core sees.
#pragma once
#include <memory>

#include "runtime/host_execution.hpp"

namespace esg::cpu {

std::unique_ptr<runtime::HostBackend> make_backend();

}  // namespace esg::cpu
