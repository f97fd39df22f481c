#include "backends/registry.hpp"

#include <stdexcept>

namespace esg::backends {
namespace {

// Never destroyed: a model compiled in a static destructor still finds its backend.
std::vector<std::unique_ptr<runtime::Backend>>& table() {
  static auto* all = new std::vector<std::unique_ptr<runtime::Backend>>;
  return *all;
}

}  // namespace

void add(std::unique_ptr<runtime::Backend> backend) {
  if (find(backend->name())) throw std::logic_error(std::string("backend '") + backend->name() + "' is added twice");
  table().push_back(std::move(backend));
}

const runtime::Backend* find(const std::string& name) {
  for (const auto& b : table())
    if (name == b->name()) return b.get();
  return nullptr;
}

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const auto& b : table()) out.push_back(b->name());
  return out;
}

}  // namespace esg::backends
