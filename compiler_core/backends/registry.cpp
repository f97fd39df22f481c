#include "backends/registry.hpp"

#include "ascend/factory.hpp"
#include "cpu/factory.hpp"

namespace esg::backends {
namespace {

// Stateless objects, made on first use and never destroyed: a model compiled in a static
// destructor still finds its backend.
const std::vector<const runtime::Backend*>& table() {
  static const auto* all = [] {
    const runtime::HostBackend* cpu = cpu::make_backend().release();
    return new std::vector<const runtime::Backend*>{cpu, ascend::make_backend(false, *cpu).release(),
                                                    ascend::make_backend(true, *cpu).release()};
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
