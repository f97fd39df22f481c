// C entry points of the distributed world (dist/world.hpp).
#include "c_api/handles.hpp"
#include "dist/world.hpp"

using esg::capi::guarded;

ESG_API esg_status esg_dist_use_mpi_comm(const void* mpi_comm) {
  guarded(nullptr, [&] { esg::dist::use_mpi_communicator(mpi_comm); });
  return esg_last_status();
}

ESG_API esg_status esg_dist_world(int* size, int* rank) {
  guarded(nullptr, [&] {
    esg::dist::World& w = esg::dist::world();
    if (size) *size = w.size();
    if (rank) *rank = w.rank();
  });
  return esg_last_status();
}
