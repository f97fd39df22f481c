// What the library does once, when it is loaded and before any call: the core's layers are static
// archives, so nothing in them registers itself (the linker drops an archive member's static
// initializers unless something names the member). Each wiring the core needs is a call here,
// and this is the one file that knows every backend. It is compiled into every binary that links
// the core (esg_core's interface sources), so the tests and fuzzers are wired as the library is.
#include "ascend/factory.hpp"
#include "backends/registry.hpp"
#include "cpu/factory.hpp"
#include "dist/world.hpp"

namespace {

[[gnu::constructor]] void start() {
  esg::dist::install_world_probe();  // ir's collective rules ask the job's world
  // The CPU first, the default; Ascend runs on it what the device cannot (host_fallback). The
  // table never destroys a backend, so `cpu` outlives both Ascend backends.
  std::unique_ptr<esg::runtime::HostBackend> cpu = esg::cpu::make_backend();
  const esg::runtime::HostBackend& host = *cpu;
  esg::backends::add(std::move(cpu));
  esg::backends::add(esg::ascend::make_backend(false, host));
  esg::backends::add(esg::ascend::make_backend(true, host));
}

}  // namespace
