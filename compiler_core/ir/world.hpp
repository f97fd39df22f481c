// The ranks a graph's collectives run among: the process's world (its size and this process's
// rank in it). A collective's rule checks its group against it and sizes what it gathers or
// scatters by it, so a graph is checked where it is built, as any other op.
#pragma once

namespace esg::ir {

struct World {
  int size = 1;
  int rank = 0;
};

// How the world is found. The distributed layer (dist/world.hpp) installs its own, which starts
// the transport when first asked; until then, and in a library without it, a world of one.
using WorldProbe = World (*)();
void set_world_probe(WorldProbe probe);
World process_world();

}  // namespace esg::ir
