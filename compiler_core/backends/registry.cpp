#include "backends/registry.hpp"

#include "ascend/backend.hpp"
#include "cpu/backend.hpp"

namespace esg::backends {
namespace {

// Stateless objects, made on first use and never destroyed: a model compiled in a static
// destructor still finds its backend.
const std::vector<const runtime::Backend*>& table() {
  static const auto* all = [] {
    const auto* cpu = new cpu::Backend();
    return new std::vector<const runtime::Backend*>{cpu, new ascend::Backend(false, *cpu), new ascend::Backend(true, *cpu)};
  }();
  return *all;
}

}  // namespace

const runtime::Backend* find(const std::string& name) {
  for (const runtime::Backend* b : table())
    if (name == b->name()) return b;
  return nullptr;
}

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const runtime::Backend* b : table()) out.push_back(b->name());
  return out;
}

}  // namespace esg::backends
