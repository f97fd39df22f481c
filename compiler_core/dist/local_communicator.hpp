// The group of one process: what every collective is in a world of one. Each is a copy.
#pragma once
#include <memory>

#include "dist/communicator.hpp"

namespace esg::dist {

std::unique_ptr<Communicator> make_local_communicator(int world_rank);

}  // namespace esg::dist
