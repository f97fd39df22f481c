// The one table of backends this library was built with, by name. The only place that knows
// every backend: the pipeline takes a runtime::Backend, and backends reach each other through it
// (Ascend's host fallback gets the CPU backend here).
#pragma once
#include <string>
#include <vector>

#include "runtime/backend.hpp"

namespace esg::backends {

// The backend called `name`, or nullptr.
const runtime::Backend* find(const std::string& name);
// Every backend's name, in the table's order ("cpu" first: the default).
std::vector<std::string> names();

}  // namespace esg::backends
