// The ranks a graph's collectives run among: the process's world (its size and this process's
// rank in it). A collective's rule checks its group against it and sizes what it gathers or
// scatters by it, so a graph is checked where it is built, as any other op.
#pragma once

namespace esg::ir {

struct World {
  int size = 1;
  int rank = 0;
};

// How the world is found. The library installs the distributed layer's at start-up
// (dist::install_world_probe, called from c_api/startup.cpp), which starts the transport when
// first asked; until then, and in a program of the layers alone, a world of one.
using WorldProbe = World (*)();
void set_world_probe(WorldProbe probe);
World process_world();

}  // namespace esg::ir
