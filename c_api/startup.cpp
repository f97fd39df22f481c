// What the library does once, when it is loaded and before any call: the core's layers are static
// archives, so nothing in them registers itself (the linker drops an archive member's static
// initializers unless something names the member). Each wiring the core needs is a call here.
#include "dist/world.hpp"

namespace {

[[gnu::constructor]] void start() {
  esg::dist::install_world_probe();  // ir's collective rules ask the job's world
}

}  // namespace
