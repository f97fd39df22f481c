#include "dist/communicator.hpp"

namespace esg::dist {

const char* reduce_name(Reduce r) {
  switch (r) {
    case Reduce::Sum: return "sum";
    case Reduce::Max: return "max";
    case Reduce::Min: return "min";
    case Reduce::Prod: return "prod";
    case Reduce::Avg: return "avg";
  }
  return "?";
}

}  // namespace esg::dist
