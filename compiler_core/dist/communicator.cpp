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

std::string ranks_str(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s + "]";
}

}  // namespace esg::dist
