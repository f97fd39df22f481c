// The process's world: the ranks of its job and the communicators of their groups. Found the
// first time something asks (a collective being built, or a model run):
//   - a communicator the caller handed over (use_mpi_communicator: the C ABI's
//     esg_dist_use_mpi_comm), whose ranks are then the world;
//   - else, in a process an MPI launcher started (mpirun sets OMPI_COMM_WORLD_SIZE, Hydra and
//     Slurm set PMI_SIZE), Open MPI through the plugin libesgraph_mpi.so, over MPI_COMM_WORLD;
//   - else a world of one process, where every collective is a copy and nothing of MPI loads.
// This layer installs itself as ir's world probe (ir/world.hpp).
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dist/communicator.hpp"

namespace esg::dist {

class World {
 public:
  int size() const;
  int rank() const;
  const char* transport() const;  // "mpi" or "local"
  // The communicator of `ranks` (ranks of the world; empty: all of them in order), made on first
  // use by every member together and kept for the process's life. Under turn().
  std::shared_ptr<Communicator> group(const std::vector<int>& ranks);
  // The process's collectives one at a time: every rank must make a group's calls in one order,
  // so a run's collectives go in turn with other runs' (of any model), and the agreement checks
  // and the making of groups with them. Whoever calls a communicator or group() holds it; the
  // transports take no lock of their own, so a small collective pays for one lock.
  std::mutex& turn();

  struct State;  // the transport and the groups made so far (world.cpp)

 private:
  friend World& world();
  World();
  std::shared_ptr<State> state_;
};

World& world();

// Makes the caller's MPI communicator (an MPI_Comm*, as the C ABI passes it) the world. Before
// anything asked for the world; an ir::Error(InvalidArgument) otherwise or for a null pointer.
void use_mpi_communicator(const void* comm);

// The timeout of each collective: ESG_COLLECTIVE_TIMEOUT_MS, else 60 s.
int64_t collective_timeout_ms();

// Makes ir's collective rules (ir/world.hpp) size and check groups against this world instead
// of a world of one. Called by the library at start-up (c_api/startup.cpp): a layer is a static
// archive, whose own static initializers the linker may drop, so none registers itself.
void install_world_probe();

}  // namespace esg::dist
