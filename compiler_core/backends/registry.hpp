// The one table of backends, by name. The pipeline takes a runtime::Backend and never names one;
// the table sees only that interface. Who fills it is the library's start-up
// (c_api/startup.cpp), the one place that knows every backend: the layers are static archives,
// so a backend cannot register itself (the linker drops a member nothing names).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend.hpp"

namespace esg::backends {

// Appends `backend` to the table. Called at start-up, before any lookup and from one thread;
// a name already in the table is a wiring bug and throws.
void add(std::unique_ptr<runtime::Backend> backend);
// The backend called `name`, or nullptr.
const runtime::Backend* find(const std::string& name);
// Every backend's name, in the order they were added ("cpu" first: the default).
std::vector<std::string> names();

}  // namespace esg::backends
